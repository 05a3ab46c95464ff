//! What one scheduling decision reports: the outcome, each evaluated node's filter verdict and scores.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::preemption::PostFilter;
use super::resources::InvalidQuantity;
use super::status::Rejection;

/// One score plugin's contribution to a node's total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginScore {
    /// The plugin.
    pub plugin: Arc<str>,
    /// The score before normalisation.
    pub raw: i64,
    /// The score after NormalizeScore (0–100).
    pub normalized: i64,
    /// The plugin's weight.
    pub weight: i64,
    /// `normalized × weight`.
    pub weighted: i64,
}

/// A node the decision evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeResult {
    /// The node.
    pub node: Arc<str>,
    /// The first filter that rejected it; `None` when it is feasible.
    pub rejection: Option<Rejection>,
    /// Per-plugin scores, in profile order (empty when the node was not scored: rejected, or the only feasible
    /// node, which kube-scheduler picks without scoring).
    pub scores: Vec<PluginScore>,
    /// Sum of the weighted scores, when scored.
    pub total: Option<i64>,
}

impl NodeResult {
    /// The score of one plugin.
    pub fn score(&self, plugin: &str) -> Option<&PluginScore> {
        self.scores.iter().find(|s| &*s.plugin == plugin)
    }
}

/// How the decision ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Bind the pod to this node.
    Scheduled {
        /// The chosen node.
        node: Arc<str>,
    },
    /// No node fits: the FailedScheduling event message (without the preemption suffix).
    Unschedulable {
        /// `0/N nodes are available: …`, or kube-scheduler's no-nodes message.
        message: String,
        /// The PreFilter rejection when the pod was refused before any node was filtered.
        pre_filter: Option<Rejection>,
        /// Plugins that rejected the pod or nodes (kube-scheduler's `UnschedulablePlugins`).
        plugins: BTreeSet<Arc<str>>,
        /// What the PostFilter chain (preemption) decided, when the engine runs it
        /// ([`super::Engine::set_post_filters`]).
        post_filter: Option<PostFilter>,
    },
    /// The pod has scheduling gates: kube-scheduler does not attempt it.
    Gated {
        /// The PodScheduled condition message.
        message: String,
    },
    /// A plugin failed (kube-scheduler's SchedulerError); the message is the event message.
    Error {
        /// The error text.
        message: String,
    },
}

/// The result of scheduling one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// How it ended.
    pub outcome: Outcome,
    /// Evaluated nodes in evaluation order (rejected ones and feasible ones).
    pub nodes: Vec<NodeResult>,
    /// Filters whose PreFilter skipped this pod.
    pub skipped_filters: Vec<Arc<str>>,
    /// Scores whose PreScore skipped this pod.
    pub skipped_scores: Vec<Arc<str>>,
    /// kube-scheduler's `EvaluatedNodes`: feasible plus rejected nodes.
    pub evaluated_nodes: usize,
    /// kube-scheduler's `FeasibleNodes`.
    pub feasible_nodes: usize,
}

impl Decision {
    pub(crate) fn with_outcome(outcome: Outcome) -> Decision {
        Decision {
            outcome,
            nodes: Vec::new(),
            skipped_filters: Vec::new(),
            skipped_scores: Vec::new(),
            evaluated_nodes: 0,
            feasible_nodes: 0,
        }
    }

    /// The chosen node, if the pod was scheduled.
    pub fn chosen(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Scheduled { node } => Some(node),
            _ => None,
        }
    }

    /// The failure message (unschedulable, gated or error), if the pod was not scheduled.
    pub fn message(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Scheduled { .. } => None,
            Outcome::Unschedulable { message, .. } | Outcome::Gated { message } | Outcome::Error { message } => {
                Some(message)
            }
        }
    }

    /// The FailedScheduling text as kube-scheduler emits it: [`Decision::message`] plus the PostFilter
    /// message (`no new claims to deallocate, preemption: …`) after a space, when the chain ran and said one.
    pub fn event_message(&self) -> Option<String> {
        match &self.outcome {
            Outcome::Unschedulable {
                message,
                post_filter: Some(post_filter),
                ..
            } => Some(match &post_filter.message {
                Some(suffix) => format!("{message} {suffix}"),
                None => message.clone(),
            }),
            _ => self.message().map(str::to_string),
        }
    }

    /// The PostFilter chain's result, when it ran.
    pub fn post_filter(&self) -> Option<&PostFilter> {
        match &self.outcome {
            Outcome::Unschedulable { post_filter, .. } => post_filter.as_ref(),
            _ => None,
        }
    }

    /// The result for one node, if it was evaluated.
    pub fn node(&self, name: &str) -> Option<&NodeResult> {
        self.nodes.iter().find(|n| &*n.node == name)
    }
}

/// A pod the engine cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// A quantity in the pod does not parse.
    #[error("pod {pod}: {source}")]
    InvalidQuantity {
        /// The pod (`namespace/name`).
        pod: String,
        /// The problem.
        #[source]
        source: InvalidQuantity,
    },
}
