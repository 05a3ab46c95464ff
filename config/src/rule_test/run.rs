//! Running test cases: the same render and scheduling code as the manager, results compared with the cases'
//! expectations.

use serde_json::Value;

use super::load::{CaseCheck, ResolvedCase, RuleTestSuite, qualified_pod};
use super::types::ExpectedPlacement;
use crate::diagnostics::SourceLocation;
use crate::object_diff::{is_subset, project, unified_diff, yaml};
use crate::object_schema::KindSchemas;
use crate::reconciler::{
    ObjectKey, Reconciler, desired_status, gather_lookups_offline, plan_offline, schema_diagnostics,
};
use crate::rule_set::{Rule, RuleSet};
use crate::scheduler::SchedulerPolicy;
use crate::scheduler::simulate::{ClusterObjects, PreemptionReport, simulate_in};

/// The time conditions are stamped with in test output (tests should not compare it).
const TEST_TIME: &str = "1970-01-01T00:00:00Z";

/// The outcome of one suite.
#[derive(Clone, Debug)]
pub struct SuiteOutcome {
    /// The suite's name.
    pub name: String,
    /// The rule under test.
    pub rule: String,
    /// Where the suite starts.
    pub source: SourceLocation,
    /// One outcome per case, in order.
    pub cases: Vec<CaseOutcome>,
}

/// The outcome of one case.
#[derive(Clone, Debug)]
pub struct CaseOutcome {
    /// The case's name.
    pub name: String,
    /// Where the case starts.
    pub source: SourceLocation,
    /// What did not match (empty: the case passed); each entry may span several lines (a diff).
    pub failures: Vec<String>,
}

impl CaseOutcome {
    /// Whether everything matched.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Runs every case of `suite` against its rule in `rules` (the loader checked that it exists).
pub fn run_suite(rules: &RuleSet, suite: &RuleTestSuite) -> SuiteOutcome {
    let rule = rules.rules().iter().find(|rule| rule.name() == suite.rule);
    let schemas = KindSchemas::of_rule_set(rules);
    let cases = suite
        .cases
        .iter()
        .map(|case| CaseOutcome {
            name: case.name.clone(),
            source: case.source.clone(),
            failures: match (rule, &case.check) {
                (Some(Rule::Reconciler(rule)), CaseCheck::Reconciler { .. }) => {
                    reconciler_failures(rule, case, &schemas)
                }
                (Some(Rule::SchedulerPolicy(policy)), CaseCheck::Scheduler { .. }) => {
                    scheduler_failures(policy, rules.kubernetes_version(), case)
                }
                _ => vec![format!("rule `{}` is not a rule this case can test", suite.rule)],
            },
        })
        .collect();
    SuiteOutcome {
        name: suite.name.clone(),
        rule: suite.rule.clone(),
        source: suite.source.clone(),
        cases,
    }
}

fn reconciler_failures(rule: &Reconciler, case: &ResolvedCase, schemas: &KindSchemas) -> Vec<String> {
    let CaseCheck::Reconciler {
        parent,
        lookups: available,
        observed,
        children,
        status,
        patches,
        error,
        not_selected,
    } = &case.check
    else {
        return Vec::new();
    };
    // The parent as the apiserver would store it: its kind's schema defaults filled in.
    let mut defaulted = parent.clone();
    schemas.apply_defaults(&mut defaulted);
    let parent = &defaulted;
    // The manager reconciles only the parents the rule's `for` selects: rendering another tells nothing true.
    match (selects_parent(rule, parent), not_selected) {
        (true, true) => {
            return vec![
                "expected the rule not to select the parent, but its `for` selects it: the manager reconciles it"
                    .to_string(),
            ];
        }
        (false, true) => return Vec::new(),
        (false, false) => {
            return vec![format!(
                "the rule's `for` ({}) does not select this parent: the manager never reconciles it (give the \
                 parent the labels, namespace and name the rule selects, or expect `notSelected: true`)",
                describe_selection(&rule.spec.watched)
            )];
        }
        (true, false) => {}
    }
    // The worker's own decision: observed children marked as the worker marks what it writes, scopes as the rule
    // set declares them, nothing signed (offline objects come from the rule author).
    // A collection's observed objects may be given as a list.
    let given: Vec<(&str, &Value)> = observed
        .iter()
        .flat_map(|(id, observed)| {
            match observed {
                Value::Array(objects) => objects.iter().collect::<Vec<_>>(),
                object => vec![object],
            }
            .into_iter()
            .map(move |object| (id.as_str(), object))
        })
        .collect();
    let planned = gather_lookups_offline(rule, parent, available).and_then(|lookups| {
        let targets = crate::reconciler::offline_patch_targets(rule, parent, available);
        plan_offline(rule, parent, &lookups, &given, &targets).map(|plan| (plan, lookups))
    });
    // A patch that fails is the case's render error, though the children are still planned (and checked).
    let patch_failure = planned
        .as_ref()
        .ok()
        .and_then(|(plan, _)| plan.patches.failures.first().cloned());
    let (plan, lookups) = match (planned, error) {
        (Ok(_), Some(expected))
            if patch_failure
                .as_ref()
                .is_some_and(|failure| failure.to_string().contains(expected.as_str())) =>
        {
            return Vec::new();
        }
        (Err(failure), Some(expected)) if failure.to_string().contains(expected.as_str()) => return Vec::new(),
        (Err(failure), Some(expected)) => {
            return vec![format!(
                "expected a render error containing {expected:?}, got:\n{failure}"
            )];
        }
        (Err(failure), None) => return vec![format!("render failed:\n{failure}")],
        (Ok(_), Some(expected)) => {
            return vec![match patch_failure {
                Some(failure) => format!("expected a render error containing {expected:?}, got:\n{failure}"),
                None => format!("expected a render error containing {expected:?}; rendering succeeded"),
            }];
        }
        (Ok(planned), None) => planned,
    };
    // Whatever the case expects, a child the apiserver would reject fails it.
    let mut failures: Vec<String> = schema_diagnostics(rule, &plan.desired, schemas)
        .iter()
        .map(ToString::to_string)
        .collect();
    failures.extend(patch_failure.map(|failure| format!("patch failed:\n{failure}")));
    if let Some(expected) = children {
        failures.extend(children_failures(expected, &plan.desired, &plan.waiting));
    }
    if let Some(expected) = patches {
        let bodies: Vec<Value> = plan.patches.apply.iter().map(|apply| apply.body.clone()).collect();
        failures.extend(patches_failures(expected, &bodies));
    }
    if let Some(expected) = status {
        let now = plan.children_after(rule);
        // Offline there is no discovery: a parent that gives `metadata.generation` is reported as with a status
        // subresource (`observedGeneration`).
        let actual = desired_status(
            rule,
            parent,
            &now,
            &lookups,
            (&plan.excluded, &plan.held),
            true,
            TEST_TIME,
        );
        if !is_subset(expected, &actual) {
            failures.push(format!(
                "status differs:\n{}",
                unified_diff(
                    "expected status",
                    &yaml(expected),
                    "actual status",
                    &yaml(&project(&actual, expected))
                )
            ));
        }
    }
    failures
}

/// Whether the rule's `for` selects the case's parent, as the worker's watch does; a parent written without a
/// namespace stands wherever the rule looks (cases may leave it out).
fn selects_parent(rule: &Reconciler, parent: &Value) -> bool {
    let text = |pointer: &str| parent.pointer(pointer).and_then(Value::as_str);
    let watched = &rule.spec.watched;
    let namespace = text("/metadata/namespace").or(watched.namespace.as_deref());
    let labels: std::collections::BTreeMap<String, String> = parent
        .pointer("/metadata/labels")
        .and_then(|labels| serde_json::from_value(labels.clone()).ok())
        .unwrap_or_default();
    let namespaced = rule.kinds().parent.as_ref().is_none_or(|kind| kind.namespaced);
    let namespace = if namespaced { namespace } else { None };
    let watched_here = if namespaced {
        std::borrow::Cow::Borrowed(watched)
    } else {
        // A cluster-scoped parent is selected whatever `for.namespace` says (the watch ignores it too).
        let mut unscoped = watched.clone();
        unscoped.namespace = None;
        std::borrow::Cow::Owned(unscoped)
    };
    watched_here.selects(namespace, text("/metadata/name").unwrap_or_default(), &labels)
}

/// The rule's `for` selection in words, for a failure.
fn describe_selection(watched: &crate::reconciler::WatchedKind) -> String {
    let mut parts = Vec::new();
    if let Some(selector) = &watched.selector {
        parts.push(format!("selector `{}`", selector.to_query_string()));
    }
    if let Some(namespace) = &watched.namespace {
        parts.push(format!("namespace `{namespace}`"));
    }
    if let Some(name) = &watched.name {
        parts.push(format!("name `{name}`"));
    }
    parts.join(", ")
}

/// Every expected patch body was applied (a subset of it), and nothing else.
fn patches_failures(expected: &[Value], applied: &[Value]) -> Vec<String> {
    let mut failures = Vec::new();
    for want in expected {
        match applied.iter().find(|have| same_child(want, have)) {
            None => failures.push(format!("no patch of {}", describe(want))),
            Some(have) if !is_subset(want, have) => failures.push(format!(
                "patch of {} differs:\n{}",
                describe(want),
                unified_diff("expected", &yaml(want), "applied", &yaml(&project(have, want)))
            )),
            Some(_) => {}
        }
    }
    for have in applied {
        if !expected.iter().any(|want| same_child(want, have)) {
            failures.push(format!(
                "{} is patched but not expected:\n{}",
                describe(have),
                yaml(have)
            ));
        }
    }
    failures
}

/// Children are told apart by apiVersion, kind, name and (when the expectation gives one) namespace.
fn same_child(expected: &Value, actual: &Value) -> bool {
    let (Some(want), Some(have)) = (ObjectKey::of(expected), ObjectKey::of(actual)) else {
        return false;
    };
    want.api_version == have.api_version
        && want.kind == have.kind
        && want.name == have.name
        && (want.namespace.is_none() || want.namespace == have.namespace)
}

fn describe(object: &Value) -> String {
    match ObjectKey::of(object) {
        Some(key) => match key.namespace {
            Some(namespace) => format!("{} {} {namespace}/{}", key.api_version, key.kind, key.name),
            None => format!("{} {} {}", key.api_version, key.kind, key.name),
        },
        None => "an object without apiVersion/kind/name".to_string(),
    }
}

fn children_failures(expected: &[Value], rendered: &[Value], waiting: &[String]) -> Vec<String> {
    let mut failures = Vec::new();
    for want in expected {
        match rendered.iter().find(|have| same_child(want, have)) {
            None => {
                let mut message = format!("child {} was not rendered", describe(want));
                if !waiting.is_empty() {
                    message.push_str(&format!(
                        " (waiting for a child they read to exist and be ready: {}; give it under `observed`)",
                        waiting.join(", ")
                    ));
                }
                failures.push(message);
            }
            Some(have) if !is_subset(want, have) => failures.push(format!(
                "child {} differs:\n{}",
                describe(want),
                unified_diff("expected", &yaml(want), "rendered", &yaml(&project(have, want)))
            )),
            Some(_) => {}
        }
    }
    for have in rendered {
        if !expected.iter().any(|want| same_child(want, have)) {
            failures.push(format!(
                "child {} was rendered but is not expected:\n{}",
                describe(have),
                yaml(have)
            ));
        }
    }
    failures
}

/// A scheduler case's failures, its pods placed as kube-scheduler of `version` places them.
fn scheduler_failures(policy: &SchedulerPolicy, version: crate::KubernetesVersion, case: &ResolvedCase) -> Vec<String> {
    let CaseCheck::Scheduler {
        nodes,
        existing,
        pods,
        seed,
        pdbs,
        storage,
        workloads,
        workload_refs,
        pod_groups,
        placements,
    } = &case.check
    else {
        return Vec::new();
    };
    let cluster = ClusterObjects {
        pdbs: pdbs.clone(),
        storage: storage.clone(),
        workloads: workloads.clone(),
        workload_refs: workload_refs.clone(),
        pod_groups: pod_groups.clone(),
        kubernetes_version: version,
    };
    let simulation = match simulate_in(
        policy,
        nodes.clone(),
        existing.clone(),
        pods.clone(),
        cluster,
        *seed,
        false,
    ) {
        Ok(simulation) => simulation,
        Err(error) => return vec![format!("the scheduler could not run: {error}")],
    };
    let mut failures = Vec::new();
    for expected in placements {
        let pod = qualified_pod(&expected.pod);
        let Some(actual) = simulation.placements.iter().find(|p| p.pod == pod) else {
            failures.push(format!("pod {pod} was not scheduled"));
            continue;
        };
        if let Some(problem) = placement_problem(expected, actual.node.as_deref(), actual.message.as_deref()) {
            failures.push(format!("pod {pod}: {problem}"));
        } else if let Some(problem) = preemption_problem(expected, actual.preemption.as_ref()) {
            failures.push(format!("pod {pod}: {problem}"));
        }
    }
    failures
}

/// An expected preemption that did not happen, or happened elsewhere or with other victims.
fn preemption_problem(expected: &ExpectedPlacement, actual: Option<&PreemptionReport>) -> Option<String> {
    let want = expected.preemption.as_ref()?;
    let victims: Vec<String> = want.victims.iter().map(|v| qualified_pod(v)).collect();
    let Some(actual) = actual else {
        return Some(format!(
            "expected it to preempt {} on {}, but preemption finds no node",
            victims.join(", "),
            want.node
        ));
    };
    (actual.node != want.node || actual.victims != victims).then(|| {
        format!(
            "expected it to preempt {} on {}, got {} on {}",
            victims.join(", "),
            want.node,
            actual.victims.join(", "),
            actual.node
        )
    })
}

fn placement_problem(expected: &ExpectedPlacement, node: Option<&str>, message: Option<&str>) -> Option<String> {
    let got = match (node, message) {
        (Some(node), _) => format!("bound to {node}"),
        (None, Some(message)) => format!("unschedulable: {message}"),
        (None, None) => "not placed".to_string(),
    };
    if let Some(want) = &expected.node {
        return (node != Some(want.as_str())).then(|| format!("expected node {want}, got {got}"));
    }
    if !expected.node_in.is_empty() {
        return (!node.is_some_and(|n| expected.node_in.iter().any(|w| w == n)))
            .then(|| format!("expected one of {}, got {got}", expected.node_in.join(", ")));
    }
    if node.is_some() {
        return Some(format!("expected it to be unschedulable, got {got}"));
    }
    match &expected.message {
        Some(want) if message != Some(want.as_str()) => Some(format!(
            "message differs:\n{}",
            unified_diff(
                "expected",
                &format!("{want}\n"),
                "actual",
                &format!("{}\n", message.unwrap_or_default())
            )
        )),
        _ => None,
    }
}
