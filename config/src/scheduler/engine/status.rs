//! Filter verdicts (status codes, reasons) and the FailedScheduling message kube-scheduler builds from them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A reason text; most are fixed strings.
pub type Reason = Cow<'static, str>;

/// Why a node (or every node) was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// The node might fit if pods were preempted.
    Unschedulable,
    /// Preemption cannot help on this node.
    UnschedulableAndUnresolvable,
}

impl Code {
    /// kube-scheduler's name for the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plugin's rejection: its name, the code and the reasons (a node's filter result or a PreFilter failure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The plugin that rejected.
    pub plugin: Arc<str>,
    /// The status code.
    pub code: Code,
    /// The reasons, in the plugin's order.
    pub reasons: Vec<Reason>,
}

impl Rejection {
    /// The reasons joined by `, ` (`Status.Message()`).
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

/// A plugin's verdict before it is attributed to the plugin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The status code.
    pub code: Code,
    /// The reasons.
    pub reasons: Vec<Reason>,
}

impl Verdict {
    /// One reason.
    pub fn new(code: Code, reason: impl Into<Reason>) -> Verdict {
        Verdict {
            code,
            reasons: vec![reason.into()],
        }
    }

    /// An UnschedulableAndUnresolvable verdict.
    pub(crate) fn unresolvable(reason: impl Into<Reason>) -> Verdict {
        Verdict::new(Code::UnschedulableAndUnresolvable, reason)
    }

    /// An Unschedulable verdict.
    pub fn unschedulable(reason: impl Into<Reason>) -> Verdict {
        Verdict::new(Code::Unschedulable, reason)
    }

    /// Attributes the verdict to a plugin.
    pub fn by(self, plugin: &Arc<str>) -> Rejection {
        Rejection {
            plugin: plugin.clone(),
            code: self.code,
            reasons: self.reasons,
        }
    }
}

/// `FitError.Error()` without the PostFilter (preemption) suffix: `0/N nodes are available: …`.
///
/// `explicit` are the rejected nodes' verdicts; nodes without one (never evaluated, or excluded by a PreFilter
/// result) count under `absent`. Reasons are counted, rendered as `<count> <reason>` and sorted as strings, so
/// `10 …` sorts before `2 …`, exactly as Go's `sort.Strings` does.
pub(crate) fn fit_error_message<'a>(
    num_all_nodes: usize,
    explicit: impl Iterator<Item = &'a [Reason]>,
    explicit_count: usize,
    absent: &[Reason],
) -> String {
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for reasons in explicit {
        for reason in reasons {
            *histogram.entry(reason).or_default() += 1;
        }
    }
    if explicit_count < num_all_nodes {
        for reason in absent {
            *histogram.entry(reason).or_default() += num_all_nodes - explicit_count;
        }
    }
    let mut lines: Vec<String> = histogram
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    lines.sort();
    let mut message = format!("0/{num_all_nodes} nodes are available:");
    if !lines.is_empty() {
        message.push_str(&format!(" {}.", lines.join(", ")));
    }
    message
}

/// The message when a PreFilter plugin rejects the pod for every node.
pub(crate) fn pre_filter_message(num_all_nodes: usize, rejection: &Rejection) -> String {
    format!("0/{num_all_nodes} nodes are available: {}.", rejection.message())
}

/// kube-scheduler's message when the cluster has no nodes at all.
pub const NO_NODES_MESSAGE: &str = "no nodes available to schedule pods";
