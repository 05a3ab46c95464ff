//! Ruleplane's declarative plugins: NodeLabel scores and NodeValue filters on a JSONPath-selected value.

// Ruleplane's declarative plugins: `NodeLabel` scores and `NodeValue` filters nodes by a value a JSONPath selects from
// the Node object.

use super::{Cycle, NodeFilter, NodeScorer, PreFilter, PreFilterPlugin, PreScore, PreScorePlugin};
use crate::jsonpath::CompiledPath;
use crate::scheduler::engine::declarative::{NodeLabelArgs, NodeValueArgs};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::{Reason, Verdict};

/// A `NodeLabel` score instance.
#[derive(Debug)]
pub struct NodeLabel {
    args: NodeLabelArgs,
    path: CompiledPath,
}

impl NodeLabel {
    /// Builds the instance from checked args.
    pub fn new(args: NodeLabelArgs, path: CompiledPath) -> NodeLabel {
        NodeLabel { args, path }
    }
}

struct Score<'a> {
    plugin: &'a NodeLabel,
}

impl PreScorePlugin for NodeLabel {
    fn pre_score<'a>(&'a self, _cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        PreScore::Run(Box::new(Score { plugin: self }))
    }
}

impl NodeScorer for Score<'_> {
    /// Already 0–100: no normalisation.
    fn score(&self, node: &NodeInfo) -> i64 {
        self.plugin.args.score(node.select(&self.plugin.path).as_ref())
    }
}

/// A `NodeValue` filter instance.
#[derive(Debug)]
pub struct NodeValue {
    args: NodeValueArgs,
    path: CompiledPath,
    reason: String,
}

impl NodeValue {
    /// Builds the instance from checked args.
    pub fn new(args: NodeValueArgs, path: CompiledPath) -> NodeValue {
        let reason = args.reason();
        NodeValue { args, path, reason }
    }
}

struct Check<'a> {
    plugin: &'a NodeValue,
}

impl PreFilterPlugin for NodeValue {
    fn pre_filter<'a>(&'a self, _cycle: &Cycle<'a>) -> PreFilter<'a> {
        PreFilter::run(Check { plugin: self })
    }
}

impl NodeFilter for Check<'_> {
    /// A node's value does not change by evicting pods: preemption cannot help, hence unresolvable.
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        let selected = node.select(&self.plugin.path);
        (!self.plugin.args.accepts(selected.as_ref()))
            .then(|| Verdict::unresolvable(Reason::Owned(self.plugin.reason.clone())))
    }
}
