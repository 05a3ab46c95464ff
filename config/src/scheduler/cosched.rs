//! Gang scheduling in scheduler-plugins' Coscheduling dialect: a pod's PodGroup label, the PodGroup's spec, and
//! Coscheduling's PreFilter verdicts and messages, mapped onto the Workload dialect's gang run (`super::gang`).

// Upstream: `pkg/coscheduling/coscheduling.go`, `pkg/coscheduling/core/core.go`, `apis/config/` and
// `apis/scheduling/v1alpha1/types.go` of sigs.k8s.io/scheduler-plugins, read at commit 903da7df (behaviour and
// messages, not code; `docs/scheduler.md`, "Gangs (Coscheduling dialect)"):
//
// - A pod joins the PodGroup named by its label `scheduling.x-k8s.io/pod-group`, in its own namespace.
// - PreFilter refuses (UnschedulableAndUnresolvable), in this order: a backed-off group (`podGroup <ns/name> failed
//   recently`); fewer than `minMember` pods carrying the label (`pre-filter pod <pod> cannot find enough sibling
//   pods, current pods number: <n>, minMember of group: <m>`); fewer than `minMember` of them without scheduling
//   gates (`pre-filter pod <pod> cannot proceed due to gated pods in the same PodGroup`); `minResources` (with
//   `pods` = `minMember`) beyond what the nodes have left (`resource gap: <ResourceList as %v>`).
// - The sample profile keeps kube-scheduler's defaults and adds Coscheduling, so its PostFilter runs after
//   DynamicResources' and DefaultPreemption's, for a PreFilter rejection too; it adds `PodGroup <ns/name> gets
//   rejected due to Pod <pod> is unschedulable even after PostFilter` unless the assigned members are within
//   `podGroupRejectPercentage` of `minMember`, and backs the group off (`podGroupBackoffSeconds`).
// - A labelled pod whose PodGroup does not exist passes PreFilter and is tried like a pod of no group: when a node
//   fits, Permit rejects it with `PodGroup not found` (Unschedulable); when none does, PostFilter adds `can not find
//   pod group` after the chain's reasons.
// - QueueSort (`Less`): priority, then the group's time (its last rejection until Permit allows it, else the
//   PodGroup's creation; a pod of no group: when it first entered activeQ), then `namespace/name`. Ruleplane sorts
//   PodGroup members so ([`QueueSort`], `SchedulingQueue::sort_in_group`) and keeps PrioritySort for other pods.
// - Permit waits until `minMember` members reached it. Ruleplane runs the group as a unit instead (`GangRun`):
//   no member waits at Permit across runs, so `scheduleTimeoutSeconds` and `permitWaitingTimeSeconds` never
//   apply. PodGroup `status` is written by scheduler-plugins' PodGroup controller
//   (`pkg/controllers/podgroup_controller.go`), never by the scheduler plugin, so Ruleplane does not write it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::engine::PostFilter;
use super::engine::preemption::{NO_CLAIMS_TO_DEALLOCATE, NOT_ELIGIBLE_NEVER, NOT_HELPFUL, PostFilters};
use super::engine::snapshot::{NodeInfo, Snapshot};
use super::engine::status::{Reason, fit_error_message};
use super::gang::{GroupCounts, GroupKey};
pub use super::pod_group::{COSCHEDULING, POD_GROUP_LABEL, group_of};
use super::queue::{GroupOrder, Moment};

/// The PodGroup kind's group/version (scheduler-plugins' CRD, not installed by Ruleplane).
pub const POD_GROUP_API: &str = "scheduling.x-k8s.io/v1alpha1";

/// What the gang run reads of a PodGroup's spec. The object comes from the cluster (untrusted): a field of the
/// wrong type reads as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodGroupSpec {
    /// `spec.minMember` (0 when absent or negative: the group is not held).
    pub min_member: usize,
    /// `spec.minResources`: resource name → quantity as written (a value that is not a string or number is left
    /// out).
    pub min_resources: BTreeMap<String, String>,
    /// `metadata.creationTimestamp`, Coscheduling's QueueSort time for the group's members ([`QueueSort`]).
    pub created: Option<Moment>,
}

impl PodGroupSpec {
    /// With the PodGroup's `metadata.creationTimestamp` (whole seconds; a time before the epoch reads as absent).
    pub fn created_at(self, created: Option<&Time>) -> PodGroupSpec {
        let created = created
            .and_then(|time| u64::try_from(time.0.as_second()).ok())
            .map(|seconds| Moment(Duration::from_secs(seconds)));
        PodGroupSpec { created, ..self }
    }

    /// Reads a PodGroup object's spec (its JSON, as the watch has it, without its metadata: see
    /// [`PodGroupSpec::created_at`]).
    pub fn of(object: &serde_json::Value) -> PodGroupSpec {
        let min_member = object
            .pointer("/spec/minMember")
            .and_then(serde_json::Value::as_i64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        let min_resources = object
            .pointer("/spec/minResources")
            .and_then(serde_json::Value::as_object)
            .map(|list| {
                list.iter()
                    .filter_map(|(name, value)| {
                        let quantity = match value {
                            serde_json::Value::String(text) => text.clone(),
                            serde_json::Value::Number(number) => number.to_string(),
                            _ => return None,
                        };
                        Some((name.clone(), quantity))
                    })
                    .collect()
            })
            .unwrap_or_default();
        PodGroupSpec {
            min_member,
            min_resources,
            created: None,
        }
    }
}

/// Coscheduling's verdict on a popped member, before its group's run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// The group has `minMember` pods: the run goes ahead with that quorum.
    Pass { min_member: usize },
    /// The PodGroup does not exist: PreFilter lets the pod through, it is tried on its own and decided by
    /// [`without_pod_group`].
    NoPodGroup,
    /// Held with this FailedScheduling text, until a member pod or the PodGroup is added or changed.
    Held(Held),
}

/// A member held by Coscheduling: its FailedScheduling text, and whether its nomination is cleared (DefaultPreemption
/// clears it when it finds no node where preemption could help).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub message: String,
    pub clear_nomination: bool,
}

/// What Coscheduling's PreFilter and PostFilter read of a group's live members.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Members {
    /// Pods carrying the group's label (any state, any scheduler): upstream lists them by label.
    pub known: usize,
    /// Of those, pods with scheduling gates.
    pub gated: usize,
    /// Members bound or being bound (upstream's assigned pods; nothing waits at Permit in Ruleplane).
    pub assigned: usize,
}

impl From<GroupCounts> for Members {
    /// What Coscheduling reads of a group's counts: its assigned pods are those bound (or being bound).
    fn from(counts: GroupCounts) -> Members {
        Members {
            known: counts.known,
            gated: counts.gated,
            assigned: counts.bound,
        }
    }
}

/// The PostFilter chain of the member's policy ahead of Coscheduling's own PostFilter (scheduler-plugins' profile
/// keeps kube-scheduler's default plugins, then adds Coscheduling: DynamicResources, DefaultPreemption, Coscheduling).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chain {
    /// DynamicResources' PostFilter runs first and gives its reason for a pod without claims (until v1.36).
    pub dynamic_resources: bool,
    /// DefaultPreemption is on.
    pub preemption: bool,
    /// `CoschedulingArgs.podGroupRejectPercentage` (defaulted).
    pub reject_percentage: i32,
}

impl Chain {
    /// The chain of a policy whose engine has `post_filters` (`None`: DefaultPreemption off, no PostFilter).
    pub fn of(post_filters: Option<&PostFilters>, reject_percentage: i32) -> Chain {
        Chain {
            dynamic_resources: post_filters
                .is_some_and(|chain| chain.dynamic_resources && chain.behaviour.dynamic_resources_explains_no_claims()),
            preemption: post_filters.is_some(),
            reject_percentage,
        }
    }
}

/// The member Coscheduling decides on.
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    pub group: &'a GroupKey,
    pub pod_name: &'a str,
    /// `preemptionPolicy: Never`: DefaultPreemption refuses before looking at nodes.
    pub never_preempts: bool,
}

/// Coscheduling's PreFilter (`core.go` `PreFilter`: the sibling count, then the gated pods), with the text
/// kube-scheduler builds from a rejection: the FitError of a PreFilter rejection, then the PostFilter chain's part
/// (which runs for a PreFilter rejection too). `num_all_nodes` is the cluster's node count.
pub fn pre_filter(
    member: Member<'_>,
    pod_group: Option<&PodGroupSpec>,
    backed_off: bool,
    members: Members,
    chain: Option<Chain>,
    num_all_nodes: usize,
) -> Gate {
    let Some(spec) = pod_group else {
        return Gate::NoPodGroup;
    };
    let reason = if backed_off {
        format!("podGroup {} failed recently", member.group)
    } else if members.known < spec.min_member {
        format!(
            "pre-filter pod {} cannot find enough sibling pods, current pods number: {}, minMember of group: {}",
            member.pod_name, members.known, spec.min_member
        )
    } else if members.known - members.gated.min(members.known) < spec.min_member {
        // Upstream counts the gated pods against the surplus of pods over `minMember`.
        format!(
            "pre-filter pod {} cannot proceed due to gated pods in the same PodGroup",
            member.pod_name
        )
    } else {
        return Gate::Pass {
            min_member: spec.min_member,
        };
    };
    Gate::Held(pre_filter_rejection(
        member,
        spec,
        &reason,
        members.assigned,
        chain,
        num_all_nodes,
    ))
}

/// The text of a member rejected by Coscheduling's PreFilter with `reason`: kube-scheduler's FitError, then the
/// PostFilter chain's part (DynamicResources, DefaultPreemption, Coscheduling).
pub fn pre_filter_rejection(
    member: Member<'_>,
    spec: &PodGroupSpec,
    reason: &str,
    assigned: usize,
    chain: Option<Chain>,
    num_all_nodes: usize,
) -> Held {
    if num_all_nodes == 0 {
        // kube-scheduler fails before PreFilter when there is no node; no PostFilter runs.
        return Held {
            message: crate::scheduler::engine::status::NO_NODES_MESSAGE.to_string(),
            clear_nomination: false,
        };
    }
    let mut parts: Vec<String> = Vec::new();
    let mut clear_nomination = false;
    if let Some(chain) = chain {
        if chain.dynamic_resources {
            parts.push(NO_CLAIMS_TO_DEALLOCATE.to_string());
        }
        if chain.preemption {
            if member.never_preempts {
                parts.push(format!("preemption: {NOT_ELIGIBLE_NEVER}"));
            } else {
                // Every node is UnschedulableAndUnresolvable after a PreFilter rejection: no candidate.
                let not_helpful = [Reason::Borrowed(NOT_HELPFUL)];
                let fit = fit_error_message(num_all_nodes, std::iter::empty(), 0, &not_helpful);
                parts.push(format!("preemption: {fit}"));
                clear_nomination = true;
            }
        }
    }
    let reject_percentage = chain.map_or(
        crate::scheduler::engine::args::DEFAULT_POD_GROUP_REJECT_PERCENTAGE,
        |c| c.reject_percentage,
    );
    parts.extend(post_filter_reason(member, Some(spec), assigned, reject_percentage));
    let mut message = format!("0/{num_all_nodes} nodes are available: {reason}.");
    if !parts.is_empty() {
        message.push(' ');
        message.push_str(&parts.join(", "));
    }
    Held {
        message,
        clear_nomination,
    }
}

/// Coscheduling's `minResources` check (`core.go` `CheckClusterResource`): the group's `minResources`, with `pods`
/// set to `minMember`, against what every node has left once the group's own pods are taken off it, summed over
/// the nodes. `None` when the cluster has room (or the group asks for nothing); else upstream's PreFilter reason,
/// `resource gap: map[…]`, which prints the missing quantities as Go prints a `ResourceList` with `%v`: each
/// `resource.Quantity` in its internal form, `{{<value> <scale>} {<nil>}  <format>}`.
pub fn resource_gap(snapshot: &Snapshot, group: &GroupKey, spec: &PodGroupSpec) -> Option<String> {
    if spec.min_resources.is_empty() {
        return None;
    }
    let mut wanted: BTreeMap<String, GoQuantity> = spec
        .min_resources
        .iter()
        .filter_map(|(name, text)| Some((name.clone(), GoQuantity::parse(text)?)))
        .collect();
    wanted.insert(
        "pods".to_string(),
        GoQuantity {
            value: i128::try_from(spec.min_member).unwrap_or(i128::MAX),
            scale: 0,
            format: "DecimalSI",
        },
    );
    for node in snapshot.list() {
        let left = left_on(node, group);
        wanted.retain(|name, quantity| {
            quantity.sub(left.get(name.as_str()).unwrap_or(&GoQuantity::ZERO));
            quantity.value > 0
        });
        if wanted.is_empty() {
            return None;
        }
    }
    let entries: Vec<String> = wanted
        .iter()
        .map(|(name, quantity)| format!("{name}:{}", quantity.go_value()))
        .collect();
    Some(format!("resource gap: map[{}]", entries.join(" ")))
}

/// What a node has left for the group (`getNodeResource`): allocatable minus the requests of the pods that are
/// not the group's, as `util.ResourceList` formats each resource.
fn left_on(node: &NodeInfo, group: &GroupKey) -> BTreeMap<String, GoQuantity> {
    let mut requested = node.requested.clone();
    let mut pods = node.pods().len();
    for pod in node.pods() {
        let theirs = pod.namespace == group.namespace && pod.labels().get(POD_GROUP_LABEL) == Some(&group.workload);
        if theirs {
            requested.accumulate(&pod.resources.requested, -1);
            pods -= 1;
        }
    }
    let allocatable = &node.allocatable;
    let quantity = |value: i64, scale: i32, format: &'static str| GoQuantity {
        value: i128::from(value),
        scale,
        format,
    };
    let mut left = BTreeMap::from([
        (
            "cpu".to_string(),
            quantity(allocatable.milli_cpu - requested.milli_cpu, -3, "DecimalSI"),
        ),
        (
            "memory".to_string(),
            quantity(allocatable.memory - requested.memory, 0, "BinarySI"),
        ),
        (
            "pods".to_string(),
            quantity(
                allocatable.allowed_pod_number - i64::try_from(pods).unwrap_or(i64::MAX),
                0,
                "BinarySI",
            ),
        ),
        (
            "ephemeral-storage".to_string(),
            quantity(
                allocatable.ephemeral_storage - requested.ephemeral_storage,
                0,
                "BinarySI",
            ),
        ),
    ]);
    for (name, value) in &allocatable.scalar {
        let format = if name.starts_with("hugepages-") {
            "BinarySI"
        } else {
            "DecimalSI"
        };
        left.insert(name.clone(), quantity(value - requested.scalar(name), 0, format));
    }
    left
}

/// A `resource.Quantity` in its int64 form (`int64Amount{value, scale}` and its format), enough to reproduce
/// `CheckClusterResource`'s arithmetic and its `%v` text.
#[derive(Clone, Debug, PartialEq, Eq)]
struct GoQuantity {
    value: i128,
    scale: i32,
    format: &'static str,
}

impl GoQuantity {
    /// The zero `Quantity{}` a missing map entry reads as.
    const ZERO: GoQuantity = GoQuantity {
        value: 0,
        scale: 0,
        format: "",
    };

    /// `ParseQuantity`'s int64 fast path. A quantity Go would keep as a decimal (e.g. `1.5Gi`, or finer than
    /// nano) is read exactly at nano scale instead (Go would print a pointer there). `None` when it does not parse.
    fn parse(text: &str) -> Option<GoQuantity> {
        let amount = crate::scheduler::engine::quantity::parse(text).ok()?;
        if text == "0" {
            return Some(GoQuantity {
                value: 0,
                scale: 0,
                format: "DecimalSI",
            });
        }
        let (positive, rest) = match text.as_bytes().first() {
            Some(b'-') => (false, &text[1..]),
            Some(b'+') => (true, &text[1..]),
            _ => (true, text),
        };
        let rest = rest.trim_start_matches('0');
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let num = if digits == 0 { "0" } else { &rest[..digits] };
        let mut rest = &rest[digits..];
        let mut denom = "";
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
            denom = &after[..end];
            rest = &after[end..];
        }
        let (binary, exponent, format) = match rest {
            "" => (false, 0, "DecimalSI"),
            "n" => (false, -9, "DecimalSI"),
            "u" => (false, -6, "DecimalSI"),
            "m" => (false, -3, "DecimalSI"),
            "k" => (false, 3, "DecimalSI"),
            "M" => (false, 6, "DecimalSI"),
            "G" => (false, 9, "DecimalSI"),
            "T" => (false, 12, "DecimalSI"),
            "P" => (false, 15, "DecimalSI"),
            "E" => (false, 18, "DecimalSI"),
            "Ki" => (true, 10, "BinarySI"),
            "Mi" => (true, 20, "BinarySI"),
            "Gi" => (true, 30, "BinarySI"),
            "Ti" => (true, 40, "BinarySI"),
            "Pi" => (true, 50, "BinarySI"),
            "Ei" => (true, 60, "BinarySI"),
            other => (false, other.get(1..)?.parse::<i32>().ok()?, "DecimalExponent"),
        };
        let width = i32::try_from(num.len() + denom.len()).ok()?;
        let (mut scale, mantissa, precision) = if binary {
            if denom.is_empty() {
                // Go: 15 - len(num) - int32(float32(exponent)*3/10) - 1.
                let digits = i32::try_from(num.len()).ok()?;
                (0, 1i128 << exponent, 15 - digits - exponent * 3 / 10 - 1)
            } else {
                (0, 1, -1)
            }
        } else {
            (exponent, 1, 18 - width)
        };
        if precision >= 0 {
            scale -= i32::try_from(denom.len()).ok()?;
            if scale >= -9 {
                let shifted: i64 = format!("{num}{denom}").parse().ok()?;
                if let Ok(value) = i64::try_from(i128::from(shifted) * mantissa) {
                    let value = i128::from(value);
                    return Some(GoQuantity {
                        value: if positive { value } else { -value },
                        scale,
                        format,
                    });
                }
            }
        }
        Some(GoQuantity {
            value: amount.nano(),
            scale: -9,
            format,
        })
    }

    /// `Quantity.Sub`: a zero quantity takes the other's format; the amounts are aligned to the finer scale.
    fn sub(&mut self, other: &GoQuantity) {
        if self.value == 0 {
            self.format = other.format;
        }
        if other.value == 0 {
            return;
        }
        if self.value == 0 {
            self.value = -other.value;
            self.scale = other.scale;
            return;
        }
        let pow = |exponent: i32| 10i128.saturating_pow(exponent.unsigned_abs());
        if self.scale > other.scale {
            self.value = self.value.saturating_mul(pow(self.scale - other.scale)) - other.value;
            self.scale = other.scale;
        } else {
            self.value -= other.value.saturating_mul(pow(other.scale - self.scale));
        }
    }

    /// `%v` of a `Quantity` whose cached string was cleared by `Sub`.
    fn go_value(&self) -> String {
        format!("{{{{{} {}}} {{<nil>}}  {}}}", self.value, self.scale, self.format)
    }
}

/// Coscheduling's group backoff (`podGroupBackoffSeconds`, upstream's `BackoffPodGroup`): a group whose run was
/// rejected is held for that long, its members told `podGroup <ns/name> failed recently` by PreFilter.
#[derive(Clone, Debug, Default)]
pub struct Backoffs {
    /// Group → when its backoff ends (time since the Unix epoch).
    until: BTreeMap<GroupKey, Duration>,
}

impl Backoffs {
    /// A member of `group` was rejected by Coscheduling's PostFilter at `now` (a rejected run, or a PreFilter
    /// rejection). Upstream backs the group off only when it has at least `minMember` pods (`known`), not at all
    /// with a backoff of 0, and does not extend a backoff still running.
    pub fn rejected(&mut self, group: &GroupKey, seconds: i64, known: usize, min_member: usize, now: Duration) {
        let Ok(seconds) = u64::try_from(seconds) else {
            return;
        };
        if seconds == 0 || known < min_member || self.until.get(group).is_some_and(|until| *until > now) {
            return;
        }
        self.until.insert(group.clone(), now + Duration::from_secs(seconds));
    }

    /// Whether `group` is backed off at `now`; an ended backoff is forgotten.
    pub fn active(&mut self, group: &GroupKey, now: Duration) -> bool {
        match self.until.get(group) {
            Some(until) if *until > now => true,
            Some(_) => {
                self.until.remove(group);
                false
            }
            None => false,
        }
    }
}

/// Coscheduling's Permit rejection of a pod whose PodGroup does not exist, as kube-scheduler reports a Permit
/// rejection: a FitError over the one node the pod was assumed on.
pub const POD_GROUP_NOT_FOUND: &str = "0/1 nodes are available: 1 PodGroup not found.";

/// Coscheduling's PostFilter reason for a pod whose PodGroup does not exist.
pub const CAN_NOT_FIND_POD_GROUP: &str = "can not find pod group";

/// What becomes of a labelled pod whose PodGroup does not exist, once its cycle ran as a pod of no group's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoPodGroup {
    /// A node fits: Permit rejects the pod ([`POD_GROUP_NOT_FOUND`]). It is forgotten from the node, its nomination
    /// is cleared, and Coscheduling is the plugin that rejected it (its PodGroup's creation moves it again).
    RejectedAtPermit,
    /// No node fits: the cycle's text with Coscheduling's PostFilter reason after the chain's; the plugins that
    /// rejected the nodes rejected the pod.
    Unschedulable { message: String },
}

/// Coscheduling's verdict on the cycle of a pod whose PodGroup does not exist (`core.go` `PreFilter` lets it
/// through, `Permit` returns `PodGroupNotFound`, `coscheduling.go` `PostFilter` says `can not find pod group`).
/// `fits`: the cycle chose a node; `event_message` and `post_filter` are the cycle's text and PostFilter chain.
///
/// Where DefaultPreemption found victims, upstream evicts them, nominates the pod, and rejects it at Permit once
/// they are gone: Ruleplane gives that final verdict at once and evicts nothing, as it evicts nothing for a gang
/// that cannot be placed (`docs/scheduler.md`, Coscheduling).
pub fn without_pod_group(fits: bool, event_message: String, post_filter: Option<&PostFilter>) -> NoPodGroup {
    if fits || post_filter.is_some_and(|p| p.preemption.is_some()) {
        return NoPodGroup::RejectedAtPermit;
    }
    NoPodGroup::Unschedulable {
        message: with_post_filter_reason(event_message, post_filter, Some(CAN_NOT_FIND_POD_GROUP.to_string())),
    }
}

/// Coscheduling's QueueSort (`coscheduling.go` `Less`, `core.go` `GetCreationTimestamp`): among pods of one
/// priority, a PodGroup's members sort by their group's time, then by `namespace/name`. The group's time is its last
/// rejection while it has one (upstream's guard against head-of-line blocking: a group that keeps failing goes
/// behind younger ones), else the PodGroup's creation. A pod whose PodGroup does not exist sorts as a pod of no
/// group (kube-scheduler's PrioritySort in Ruleplane).
#[derive(Clone, Debug, Default)]
pub struct QueueSort {
    /// Group → its last rejection, until it reaches its quorum.
    failed: BTreeMap<GroupKey, Moment>,
}

impl QueueSort {
    /// The group was rejected at `now` (`MarkPodGroupScheduleFailure`: a rejected run, or a member held by PreFilter,
    /// after which upstream's PostFilter rejects the group).
    pub fn rejected(&mut self, group: &GroupKey, now: Moment) {
        self.failed.insert(group.clone(), now);
    }

    /// The group reached its quorum (`ClearPodGroupScheduleFailure`), or its PodGroup is gone: it sorts by its
    /// creation again.
    pub fn forget(&mut self, group: &GroupKey) {
        self.failed.remove(group);
    }

    /// Where a member named `pod_name` sorts, given its group's PodGroup; `None` (PrioritySort) without one.
    pub fn order(&self, group: &GroupKey, pod_group: Option<&PodGroupSpec>, pod_name: &str) -> Option<GroupOrder> {
        let created = pod_group?.created;
        let time = self.failed.get(group).copied().or(created)?;
        Some(GroupOrder {
            time,
            name: format!("{}/{pod_name}", group.namespace).into(),
        })
    }
}

/// Coscheduling's PostFilter reason for a member that found no node (`coscheduling.go` `PostFilter`): none once
/// `assigned` members reach `minMember`, nor while the share still missing is at most `reject_percentage`; else the
/// group's rejection. A labelled pod whose PodGroup does not exist gets `can not find pod group`.
pub fn post_filter_reason(
    member: Member<'_>,
    pod_group: Option<&PodGroupSpec>,
    assigned: usize,
    reject_percentage: i32,
) -> Option<String> {
    let Some(spec) = pod_group else {
        return Some(CAN_NOT_FIND_POD_GROUP.to_string());
    };
    if assigned >= spec.min_member {
        return None;
    }
    // Upstream compares float64 shares; both are exact in f64 for any realistic count.
    let missing = (spec.min_member - assigned) as f64 / spec.min_member as f64;
    if missing <= f64::from(reject_percentage) / 100.0 {
        return None;
    }
    Some(format!(
        "PodGroup {} gets rejected due to Pod {} is unschedulable even after PostFilter",
        member.group, member.pod_name
    ))
}

/// A member's FailedScheduling text (`event_message`, the FitError and the chain's part) with Coscheduling's
/// PostFilter reason after the chain's: joined by `, ` to the chain's reasons, or after a space when the chain said
/// nothing. A chain that nominated a node ended there (DefaultPreemption succeeded): Coscheduling's did not run.
/// Without nodes kube-scheduler fails before PostFilter: the text is its no-nodes message alone.
pub fn with_post_filter_reason(
    event_message: String,
    post_filter: Option<&PostFilter>,
    reason: Option<String>,
) -> String {
    let Some(reason) = reason else {
        return event_message;
    };
    if event_message == crate::scheduler::engine::status::NO_NODES_MESSAGE {
        return event_message;
    }
    match post_filter {
        Some(post_filter) if post_filter.preemption.is_some() => event_message,
        Some(PostFilter { message: Some(_), .. }) => format!("{event_message}, {reason}"),
        _ => format!("{event_message} {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::pod_group::Dialect;
    use crate::scheduler::workload_api::WorkloadApi;
    use serde_json::json;

    /// The group of a pod in namespace `ns` with `labels` and, in v1.35's dialect, `workload_ref`.
    fn pod(labels: serde_json::Value, workload_ref: Option<serde_json::Value>) -> Option<GroupKey> {
        let labels: BTreeMap<String, String> = serde_json::from_value(labels).expect("labels");
        let mut spec = json!({"containers": [{"name": "c"}]});
        if let Some(reference) = workload_ref {
            spec["workloadRef"] = reference;
        }
        GroupKey::of(WorkloadApi::V1Alpha1, "ns", Some(&labels), Some(&spec))
    }

    #[test]
    fn the_chain_gives_dynamic_resources_reason_until_v1_36_only() {
        use crate::scheduler::engine::Behaviour;
        for (version, explains) in [
            (crate::KubernetesVersion::V1_35, true),
            (crate::KubernetesVersion::V1_36, true),
            (crate::KubernetesVersion::V1_37, false),
        ] {
            let post_filters = PostFilters {
                behaviour: Behaviour::of(version),
                ..PostFilters::default()
            };
            let chain = Chain::of(Some(&post_filters), 60);
            assert_eq!(chain.dynamic_resources, explains, "{version}");
            assert!(chain.preemption);
        }
        let without_dra = PostFilters {
            dynamic_resources: false,
            ..PostFilters::default()
        };
        assert!(!Chain::of(Some(&without_dra), 60).dynamic_resources);
    }

    #[test]
    fn a_pod_joins_the_pod_group_its_label_names() {
        let group = pod(json!({POD_GROUP_LABEL: "train"}), None).expect("a member");
        assert_eq!(group.dialect, Dialect::PodGroup);
        assert_eq!(group.to_string(), "ns/train");
        assert_eq!(group.plugin(), COSCHEDULING);
        assert_eq!(pod(json!({POD_GROUP_LABEL: ""}), None), None);
        assert_eq!(pod(json!({"app": "x"}), None), None);
    }

    #[test]
    fn a_pod_naming_a_workload_and_a_pod_group_belongs_to_the_workload() {
        let group = pod(
            json!({POD_GROUP_LABEL: "train"}),
            Some(json!({"name": "job", "podGroup": "workers"})),
        )
        .expect("a member");
        assert_eq!(group.dialect, Dialect::Workload);
        assert_eq!(group.to_string(), "ns/job/workers");
        assert_eq!(group.plugin(), super::super::gang::GANG_SCHEDULING);
    }

    #[test]
    fn the_spec_reads_min_member_and_ignores_what_is_malformed() {
        let spec = |value| PodGroupSpec::of(&value);
        assert_eq!(spec(json!({"spec": {"minMember": 3}})).min_member, 3);
        assert_eq!(spec(json!({"spec": {"minMember": -1}})).min_member, 0);
        assert_eq!(spec(json!({"spec": {"minMember": "3"}})).min_member, 0);
        assert_eq!(spec(json!({})).min_member, 0);
        let resources = spec(json!({"spec": {"minMember": 2, "minResources": {"cpu": "3", "memory": 1024, "x": {}}}}));
        assert_eq!(
            resources.min_resources,
            BTreeMap::from([
                ("cpu".to_string(), "3".to_string()),
                ("memory".to_string(), "1024".to_string())
            ])
        );
    }

    fn group_spec(min_member: usize) -> PodGroupSpec {
        PodGroupSpec {
            min_member,
            min_resources: BTreeMap::new(),
            created: None,
        }
    }

    fn member<'a>(group: &'a GroupKey) -> Member<'a> {
        Member {
            group,
            pod_name: "w-0",
            never_preempts: false,
        }
    }

    fn train() -> GroupKey {
        pod(json!({POD_GROUP_LABEL: "train"}), None).expect("a member")
    }

    const DEFAULT_CHAIN: Chain = Chain {
        dynamic_resources: true,
        preemption: true,
        reject_percentage: 10,
    };

    fn held(gate: Gate) -> String {
        match gate {
            Gate::Held(held) => held.message,
            other => panic!("not held: {other:?}"),
        }
    }

    #[test]
    fn pre_filter_holds_a_short_group_with_the_fit_error_and_the_post_filter_chains_texts() {
        let group = train();
        let spec = group_spec(3);
        let members = |known| Members {
            known,
            gated: 0,
            assigned: 0,
        };
        assert_eq!(
            held(pre_filter(
                member(&group),
                Some(&spec),
                false,
                members(2),
                Some(DEFAULT_CHAIN),
                4
            )),
            "0/4 nodes are available: pre-filter pod w-0 cannot find enough sibling pods, current pods number: 2, \
             minMember of group: 3. no new claims to deallocate, preemption: 0/4 nodes are available: 4 Preemption \
             is not helpful for scheduling., PodGroup ns/train gets rejected due to Pod w-0 is unschedulable even \
             after PostFilter"
        );
        let Gate::Held(cleared) = pre_filter(member(&group), Some(&spec), false, members(2), Some(DEFAULT_CHAIN), 4)
        else {
            panic!("held")
        };
        assert!(
            cleared.clear_nomination,
            "DefaultPreemption found no node: the nomination goes"
        );
        assert_eq!(
            pre_filter(member(&group), Some(&spec), false, members(3), Some(DEFAULT_CHAIN), 4),
            Gate::Pass { min_member: 3 }
        );
        assert_eq!(
            pre_filter(member(&group), Some(&group_spec(0)), false, members(1), None, 4),
            Gate::Pass { min_member: 0 }
        );
    }

    #[test]
    fn pre_filter_texts_follow_the_policys_post_filters_and_the_pods_preemption_policy() {
        let group = train();
        let spec = group_spec(3);
        let members = Members {
            known: 1,
            gated: 0,
            assigned: 0,
        };
        assert_eq!(
            held(pre_filter(member(&group), Some(&spec), false, members, None, 2)),
            "0/2 nodes are available: pre-filter pod w-0 cannot find enough sibling pods, current pods number: 1, \
             minMember of group: 3. PodGroup ns/train gets rejected due to Pod w-0 is unschedulable even after \
             PostFilter"
        );
        let never = Member {
            never_preempts: true,
            ..member(&group)
        };
        let chain = Chain {
            dynamic_resources: false,
            ..DEFAULT_CHAIN
        };
        assert_eq!(
            held(pre_filter(never, Some(&spec), false, members, Some(chain), 2)),
            "0/2 nodes are available: pre-filter pod w-0 cannot find enough sibling pods, current pods number: 1, \
             minMember of group: 3. preemption: not eligible due to preemptionPolicy=Never., PodGroup ns/train gets \
             rejected due to Pod w-0 is unschedulable even after PostFilter"
        );
        assert_eq!(
            held(pre_filter(
                member(&group),
                Some(&spec),
                false,
                members,
                Some(DEFAULT_CHAIN),
                0
            )),
            "no nodes available to schedule pods"
        );
    }

    #[test]
    fn pre_filter_holds_a_group_whose_gated_pods_leave_fewer_than_min_member_ungated() {
        let group = train();
        let spec = group_spec(3);
        let members = |known, gated| Members {
            known,
            gated,
            assigned: 0,
        };
        let chain = Chain {
            dynamic_resources: false,
            preemption: false,
            reject_percentage: 10,
        };
        assert_eq!(
            held(pre_filter(
                member(&group),
                Some(&spec),
                false,
                members(4, 2),
                Some(chain),
                2
            )),
            "0/2 nodes are available: pre-filter pod w-0 cannot proceed due to gated pods in the same PodGroup. \
             PodGroup ns/train gets rejected due to Pod w-0 is unschedulable even after PostFilter"
        );
        // One gated pod of four leaves three ungated: the quorum.
        assert_eq!(
            pre_filter(member(&group), Some(&spec), false, members(4, 1), Some(chain), 2),
            Gate::Pass { min_member: 3 }
        );
    }

    #[test]
    fn a_backed_off_group_is_held_as_failed_recently_until_its_backoff_ends() {
        let group = train();
        let spec = group_spec(2);
        let members = Members {
            known: 2,
            gated: 0,
            assigned: 0,
        };
        let chain = Chain {
            dynamic_resources: false,
            preemption: false,
            reject_percentage: 10,
        };
        assert_eq!(
            held(pre_filter(member(&group), Some(&spec), true, members, Some(chain), 3)),
            "0/3 nodes are available: podGroup ns/train failed recently. PodGroup ns/train gets rejected due to Pod \
             w-0 is unschedulable even after PostFilter"
        );
        let mut backoffs = Backoffs::default();
        let at = |seconds| Duration::from_secs(seconds);
        backoffs.rejected(&group, 0, 2, 2, at(100));
        assert!(!backoffs.active(&group, at(100)), "a backoff of 0 is none");
        backoffs.rejected(&group, 10, 1, 2, at(100));
        assert!(
            !backoffs.active(&group, at(100)),
            "a group short of minMember pods is not backed off"
        );
        backoffs.rejected(&group, 10, 2, 2, at(100));
        backoffs.rejected(&group, 10, 2, 2, at(105));
        assert!(backoffs.active(&group, at(109)), "a running backoff is not extended");
        assert!(!backoffs.active(&group, at(110)));
    }

    #[test]
    fn a_pod_whose_pod_group_does_not_exist_passes_pre_filter() {
        let group = train();
        assert_eq!(
            pre_filter(member(&group), None, false, Members::default(), Some(DEFAULT_CHAIN), 4),
            Gate::NoPodGroup
        );
        assert_eq!(
            pre_filter(member(&group), None, true, Members::default(), None, 4),
            Gate::NoPodGroup,
            "no PodGroup, no group backoff"
        );
    }

    #[test]
    fn a_pod_whose_pod_group_does_not_exist_is_rejected_at_permit_when_a_node_fits() {
        assert_eq!(
            without_pod_group(true, String::new(), None),
            NoPodGroup::RejectedAtPermit
        );
        assert_eq!(POD_GROUP_NOT_FOUND, "0/1 nodes are available: 1 PodGroup not found.");
    }

    #[test]
    fn a_pod_whose_pod_group_does_not_exist_and_fits_nowhere_says_it_after_the_chains_reasons() {
        use crate::scheduler::engine::Nominate;
        let fit = "0/2 nodes are available: 2 Insufficient cpu.".to_string();
        let chain = PostFilter {
            message: Some(
                "no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found \
                 for incoming pod."
                    .into(),
            ),
            nominate: Nominate::Leave,
            preemption: None,
        };
        let event = format!("{fit} {}", chain.message.as_deref().unwrap_or_default());
        assert_eq!(
            without_pod_group(false, event.clone(), Some(&chain)),
            NoPodGroup::Unschedulable {
                message: "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, preemption: 0/2 \
                          nodes are available: 2 No preemption victims found for incoming pod., can not find pod group"
                    .into()
            }
        );
        // A policy without PostFilter plugins: Coscheduling's is the only one, after a space.
        assert_eq!(
            without_pod_group(false, fit.clone(), None),
            NoPodGroup::Unschedulable {
                message: "0/2 nodes are available: 2 Insufficient cpu. can not find pod group".into()
            }
        );
        // No node at all: kube-scheduler fails before PostFilter.
        assert_eq!(
            without_pod_group(false, "no nodes available to schedule pods".into(), None),
            NoPodGroup::Unschedulable {
                message: "no nodes available to schedule pods".into()
            }
        );
    }

    #[test]
    fn a_pod_whose_pod_group_does_not_exist_evicts_nothing_and_gets_the_permit_rejection_at_once() {
        use crate::scheduler::engine::{Nominate, Preemption};
        let preempting = PostFilter {
            message: None,
            nominate: Nominate::Set("n1".into()),
            preemption: Some(Preemption {
                node: "n1".into(),
                victims: Vec::new(),
                pdb_violations: 0,
                lower_nominated_to_clear: Vec::new(),
            }),
        };
        assert_eq!(
            without_pod_group(
                false,
                "0/2 nodes are available: 2 Insufficient cpu.".into(),
                Some(&preempting)
            ),
            NoPodGroup::RejectedAtPermit
        );
    }

    #[test]
    fn the_creation_time_is_read_to_the_second() {
        let time = |text: &str| Time(text.parse().expect("a time"));
        let spec = PodGroupSpec::of(&json!({"spec": {"minMember": 2}})).created_at(Some(&time("2026-11-26T19:00:01Z")));
        assert_eq!(spec.created, Some(Moment(Duration::from_secs(1_795_719_601))));
        assert_eq!(spec.min_member, 2);
        let before_the_epoch = PodGroupSpec::default().created_at(Some(&time("1969-12-31T23:59:59Z")));
        assert_eq!(before_the_epoch.created, None);
    }

    #[test]
    fn members_sort_by_their_pod_groups_creation_then_by_its_last_rejection_until_the_group_is_placed() {
        let group = train();
        let at = |seconds| Moment(Duration::from_secs(seconds));
        let spec = PodGroupSpec {
            created: Some(at(100)),
            ..group_spec(2)
        };
        let mut sort = QueueSort::default();
        let order = |sort: &QueueSort, spec| sort.order(&group, spec, "w-1");
        assert_eq!(
            order(&sort, Some(&spec)),
            Some(GroupOrder {
                time: at(100),
                name: "ns/w-1".into()
            })
        );
        sort.rejected(&group, at(130));
        assert_eq!(order(&sort, Some(&spec)).map(|o| o.time), Some(at(130)));
        sort.rejected(&group, at(150));
        assert_eq!(
            order(&sort, Some(&spec)).map(|o| o.time),
            Some(at(150)),
            "the last rejection"
        );
        sort.forget(&group);
        assert_eq!(order(&sort, Some(&spec)).map(|o| o.time), Some(at(100)));
        assert_eq!(order(&sort, None), None, "no PodGroup: PrioritySort");
    }

    #[test]
    fn post_filter_rejects_the_group_unless_assigned_members_are_close_enough_to_min_member() {
        let group = train();
        let spec = group_spec(10);
        let reason = |assigned, percentage| post_filter_reason(member(&group), Some(&spec), assigned, percentage);
        let rejected =
            Some("PodGroup ns/train gets rejected due to Pod w-0 is unschedulable even after PostFilter".into());
        assert_eq!(reason(0, 10), rejected);
        assert_eq!(reason(8, 10), rejected);
        // One of ten missing is 10 %: at most the threshold, the others may still complete the group.
        assert_eq!(reason(9, 10), None);
        assert_eq!(reason(10, 10), None);
        assert_eq!(reason(9, 0), rejected);
        assert_eq!(reason(0, 100), None);
        assert_eq!(
            post_filter_reason(member(&group), None, 0, 10),
            Some("can not find pod group".into())
        );
    }

    #[test]
    fn the_post_filter_reason_follows_the_chains_reasons() {
        use crate::scheduler::engine::{Nominate, Preemption};
        let reason =
            || Some("PodGroup ns/train gets rejected due to Pod w-0 is unschedulable even after PostFilter".into());
        let fit = "0/2 nodes are available: 2 Insufficient cpu.".to_string();
        let chain = PostFilter {
            message: Some(
                "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.".into(),
            ),
            nominate: Nominate::Leave,
            preemption: None,
        };
        let event = format!("{fit} {}", chain.message.as_deref().unwrap_or_default());
        assert_eq!(
            with_post_filter_reason(event.clone(), Some(&chain), reason()),
            format!("{event}, PodGroup ns/train gets rejected due to Pod w-0 is unschedulable even after PostFilter")
        );
        assert_eq!(
            with_post_filter_reason(fit.clone(), None, reason()),
            format!("{fit} PodGroup ns/train gets rejected due to Pod w-0 is unschedulable even after PostFilter")
        );
        assert_eq!(with_post_filter_reason(event.clone(), Some(&chain), None), event);
        let nominated = PostFilter {
            message: None,
            nominate: Nominate::Set("n1".into()),
            preemption: Some(Preemption {
                node: "n1".into(),
                victims: Vec::new(),
                pdb_violations: 0,
                lower_nominated_to_clear: Vec::new(),
            }),
        };
        assert_eq!(with_post_filter_reason(fit.clone(), Some(&nominated), reason()), fit);
    }
}

#[cfg(test)]
mod resource_gap_tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::json;

    fn node(name: &str, cpu: &str, memory: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
        }))
        .expect("node")
    }

    fn pod(name: &str, node: &str, cpu: &str, group: Option<&str>) -> Pod {
        let labels = group.map_or(json!({}), |g| json!({POD_GROUP_LABEL: g}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        }))
        .expect("pod")
    }

    fn group() -> GroupKey {
        group_of(
            "ns",
            Some(&BTreeMap::from([(POD_GROUP_LABEL.to_string(), "train".to_string())])),
        )
        .expect("a group")
    }

    fn spec(min_member: usize, resources: &[(&str, &str)]) -> PodGroupSpec {
        PodGroupSpec {
            min_member,
            min_resources: resources.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            created: None,
        }
    }

    #[test]
    fn the_gap_prints_what_is_missing_as_go_prints_a_resource_list() {
        // Checked against Go: k8s.io/apimachinery v0.35.4, `fmt.Errorf("resource gap: %v", list)` after the same
        // subtractions prints these forms (the cached string is cleared by Sub: two spaces).
        let snapshot = Snapshot::build(vec![node("n1", "1500m", "1Gi")], vec![]).expect("snapshot");
        assert_eq!(
            resource_gap(&snapshot, &group(), &spec(3, &[("cpu", "4"), ("memory", "4Gi")])),
            Some(
                "resource gap: map[cpu:{{2500 -3} {<nil>}  DecimalSI} memory:{{3221225472 0} {<nil>}  BinarySI}]"
                    .into()
            )
        );
    }

    #[test]
    fn the_nodes_are_summed_and_the_groups_own_pods_do_not_count_against_it() {
        let nodes = vec![node("n1", "2", "8Gi"), node("n2", "2", "8Gi")];
        let pods = vec![pod("other", "n1", "1", None), pod("mine", "n2", "2", Some("train"))];
        let snapshot = Snapshot::build(nodes, pods).expect("snapshot");
        // 1 cpu left on n1, 2 on n2 (the group's own pod is taken off): 3 cpu fit, 4 do not.
        assert_eq!(resource_gap(&snapshot, &group(), &spec(2, &[("cpu", "3")])), None);
        assert_eq!(
            resource_gap(&snapshot, &group(), &spec(2, &[("cpu", "4")])),
            Some("resource gap: map[cpu:{{1000 -3} {<nil>}  DecimalSI}]".into())
        );
        // `pods` is always minMember (109 + 110 free slots), and an unknown resource is missing whole.
        assert_eq!(
            resource_gap(&snapshot, &group(), &spec(300, &[("example.com/gpu", "1")])),
            Some(
                "resource gap: map[example.com/gpu:{{1 0} {<nil>}  DecimalSI} pods:{{81 0} {<nil>}  DecimalSI}]".into()
            )
        );
        assert_eq!(
            resource_gap(&snapshot, &group(), &spec(300, &[])),
            None,
            "no minResources, no check"
        );
    }

    #[test]
    fn quantities_parse_to_gos_int64_form() {
        let parse = |text| GoQuantity::parse(text).map(|q| (q.value, q.scale, q.format));
        assert_eq!(parse("4"), Some((4, 0, "DecimalSI")));
        assert_eq!(parse("500m"), Some((500, -3, "DecimalSI")));
        assert_eq!(parse("1.5"), Some((15, -1, "DecimalSI")));
        assert_eq!(parse("2k"), Some((2, 3, "DecimalSI")));
        assert_eq!(parse("4Gi"), Some((4 << 30, 0, "BinarySI")));
        assert_eq!(parse("1e3"), Some((1, 3, "DecimalExponent")));
        assert_eq!(parse("0"), Some((0, 0, "DecimalSI")));
        assert_eq!(parse("1.5Gi"), Some((1_610_612_736_000_000_000, -9, "BinarySI")));
        assert_eq!(parse("x"), None);
    }
}
