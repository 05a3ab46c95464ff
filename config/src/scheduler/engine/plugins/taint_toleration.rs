//! TaintToleration: filters untolerated NoSchedule/NoExecute taints, scores PreferNoSchedule ones.

// TaintToleration: rejects nodes with an untolerated NoSchedule/NoExecute taint; scores fewer untolerated
// PreferNoSchedule taints higher.

use k8s_openapi::api::core::v1::Toleration;

use super::{Cycle, NodeFilter, NodeScorer, PreFilter, PreFilterPlugin, PreScore, PreScorePlugin, default_normalize};
use crate::scheduler::engine::labels::{pod_tolerations, tolerated, untolerated_hard_taint};
use crate::scheduler::engine::snapshot::NodeInfo;
use crate::scheduler::engine::status::Verdict;

/// The reason for nodes with an untolerated taint (v1.35 no longer names the taint).
pub const REASON: &str = "node(s) had untolerated taint(s)";

/// The plugin (filter and score).
#[derive(Debug)]
pub struct TaintToleration;

struct Check<'a> {
    tolerations: &'a [Toleration],
}

impl PreFilterPlugin for TaintToleration {
    fn pre_filter<'a>(&'a self, cycle: &Cycle<'a>) -> PreFilter<'a> {
        PreFilter::run(Check {
            tolerations: pod_tolerations(cycle.pod.pod()),
        })
    }
}

impl NodeFilter for Check<'_> {
    fn filter(&self, node: &NodeInfo) -> Option<Verdict> {
        untolerated_hard_taint(node.taints(), self.tolerations).map(|_| Verdict::unresolvable(REASON))
    }
}

struct Score {
    /// Only tolerations that can tolerate PreferNoSchedule taints (effect empty or PreferNoSchedule).
    tolerations: Vec<Toleration>,
}

impl PreScorePlugin for TaintToleration {
    fn pre_score<'a>(&'a self, cycle: &Cycle<'a>, _nodes: &[&'a NodeInfo]) -> PreScore<'a> {
        let tolerations = pod_tolerations(cycle.pod.pod())
            .iter()
            .filter(|t| matches!(t.effect.as_deref(), None | Some("") | Some("PreferNoSchedule")))
            .cloned()
            .collect();
        PreScore::Run(Box::new(Score { tolerations }))
    }
}

impl NodeScorer for Score {
    fn score(&self, node: &NodeInfo) -> i64 {
        node.taints()
            .iter()
            .filter(|taint| taint.effect == "PreferNoSchedule" && !tolerated(&self.tolerations, taint))
            .count() as i64
    }

    fn normalize(&self, _nodes: &[&NodeInfo], scores: &mut [i64]) {
        default_normalize(scores, true);
    }
}
