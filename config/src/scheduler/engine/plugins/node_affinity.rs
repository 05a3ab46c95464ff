//! NodeAffinity: nodeSelector, required and added affinity as a filter; preferred terms as a score.

// NodeAffinity: `nodeSelector`, required node affinity and the profile's added affinity as a filter (with a PreFilter
// restricting candidates to `metadata.name` matchFields); preferred terms as a score.

use std::collections::BTreeSet;

use super::{Cycle, NodeFilter, NodeScorer, PreFilter, PreFilterPlugin, PreScore, PreScorePlugin, default_normalize};
use crate::scheduler::engine::args::NodeAffinityArgs;
use crate::scheduler::engine::field::FieldPath;
use crate::scheduler::engine::labels::{NodeSelector, PreferredTerms, RequiredNodeAffinity};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;

/// The reason for nodes not matching the pod's selector or affinity.
pub const REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// The reason for nodes not matching the profile's added affinity.
pub const REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// The PreFilter reason when the `metadata.name` matchFields of the terms leave no node.
pub const REASON_CONFLICT: &str = "pod affinity terms conflict";

/// The plugin (filter and score), with the profile's added affinity compiled.
#[derive(Debug)]
pub struct NodeAffinity {
    added_required: Option<NodeSelector>,
    added_preferred: Option<PreferredTerms>,
}

impl NodeAffinity {
    /// Compiles the added affinity (already validated).
    pub fn new(args: &NodeAffinityArgs) -> NodeAffinity {
        let affinity = args.added_affinity.as_ref();
        let root = FieldPath::root();
        NodeAffinity {
            added_required: affinity
                .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
                .map(|required| NodeSelector::compile(required, &root)),
            added_preferred: affinity
                .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
                .filter(|terms| !terms.is_empty())
                .and_then(|terms| PreferredTerms::compile(terms, &root).ok()),
        }
    }
}

struct Check<'a> {
    added: Option<&'a NodeSelector>,
    required: RequiredNodeAffinity,
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        let spec = cycle.pod.pod().spec.as_ref();
        let required = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
        let has_node_selector = spec.is_some_and(|s| s.node_selector.is_some());
        if required.is_none() && self.added_required.is_none() && !has_node_selector {
            return PreFilter::Skip;
        }
        let check = Check {
            added: self.added_required.as_ref(),
            required: RequiredNodeAffinity::of(cycle.pod.pod()),
        };
        let terms = required.map(|r| r.node_selector_terms.as_slice()).unwrap_or_default();
        // Candidate nodes from `metadata.name In` matchFields: the union over terms of each term's
        // intersection; a term without such a field allows every node.
        let mut names: Option<BTreeSet<String>> = None;
        for term in terms {
            let mut term_names: Option<BTreeSet<String>> = None;
            for field in term.match_fields.iter().flatten() {
                if field.key == "metadata.name" && field.operator == "In" {
                    let values: BTreeSet<String> = field.values.iter().flatten().cloned().collect();
                    term_names = Some(match term_names {
                        None => values,
                        Some(previous) => previous.intersection(&values).cloned().collect(),
                    });
                }
            }
            let Some(term_names) = term_names else {
                return PreFilter::run(check);
            };
            names.get_or_insert_with(BTreeSet::new).extend(term_names);
        }
        match names {
            Some(names) if names.is_empty() => PreFilter::Reject(Verdict::unresolvable(REASON_CONFLICT)),
            Some(names) => PreFilter::Run {
                filter: Box::new(check),
                nodes: Some(names),
            },
            None => PreFilter::run(check),
        }
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        if let Some(added) = self.added
            && !added.matches(node)
        {
            return Some(Verdict::unresolvable(REASON_ENFORCED));
        }
        (!self.required.matches(node)).then(|| Verdict::unresolvable(REASON_POD))
    }
}

struct Score<'a> {
    added: Option<&'a PreferredTerms>,
    preferred: Option<PreferredTerms>,
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        let terms = cycle
            .pod
            .pod()
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| na.preferred_during_scheduling_ignored_during_execution.as_ref());
        let path = FieldPath::root();
        let preferred = match terms.map(|t| PreferredTerms::compile(t, &path)) {
            None => None,
            Some(Ok(preferred)) => Some(preferred),
            Some(Err(errors)) => {
                return PreScore::Error(aggregate(&errors));
            }
        };
        if preferred.is_none() && self.added_preferred.is_none() {
            return PreScore::Skip;
        }
        PreScore::Run(Box::new(Score {
            added: self.added_preferred.as_ref(),
            preferred,
        }))
    }
}

impl NodeScorer for Score<'_> {
    fn score(&self, node: &NodeInfo) -> i64 {
        self.added.map_or(0, |terms| terms.score(node)) + self.preferred.as_ref().map_or(0, |terms| terms.score(node))
    }

    fn normalize(&self, _nodes: &[&NodeInfo], scores: &mut [i64]) {
        default_normalize(scores, false);
    }
}

/// Go's `errors.NewAggregate(...).Error()`: one message as is, several in brackets.
pub(crate) fn aggregate(errors: &[crate::scheduler::engine::field::FieldError]) -> String {
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    if messages.len() == 1 {
        messages.concat()
    } else {
        format!("[{}]", messages.join(", "))
    }
}
