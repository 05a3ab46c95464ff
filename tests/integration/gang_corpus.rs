//! Gang fidelity on a seeded random corpus (Workload dialect): the same random gangs (minCount, extra members,
//! member size) go one after another to a Ruleplane policy and to the real kube-scheduler of the plane's version with
//! the Workload gates on, each on its own twin set of nodes (same capacities, a label per side) and in its own
//! namespace (same Workload and pod names), each gang settled before the next. What is bound (all of a gang or none
//! of it, and how many) and the FailedScheduling texts must be kube-scheduler's: in v1.35 those of the members
//! unschedulable for their own reason (its siblings wait at Permit), since v1.36 every member's (the pod-group
//! cycle tells each one), and the condition set on the gang's PodGroup. Some gangs meet
//! kube-scheduler's PreEnqueue first: members before their Workload, fewer than minCount members, or a group the
//! Workload does not have. kube-scheduler writes nothing for a held member, so what is compared there is that
//! neither side binds it or marks it unschedulable, and that completing the gang places it on both.
//!
//! kube-scheduler v1.35 keeps the members of a gang that cannot fit waiting at Permit for 5 minutes where Ruleplane
//! rejects them at once (docs/scheduler.md "Gangs (Workload dialect)"): a rejected gang is deleted on both sides
//! once settled, which also frees kube-scheduler's reservations. So is a placed gang whose nodes differ from one side
//! to the other in what they have left (a tie between equal nodes broken differently); a placed gang runs until it
//! finishes at random before a later gang, so that the nodes neither fill up for good nor drift apart.
//!
//! `RULEPLANE_GANG_CORPUS_GANGS` (default 12) and `RULEPLANE_GANG_CORPUS_SEED` size and seed it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use ruleplane_config::scheduler::engine::SplitMix64;
use serde_json::json;

use crate::support::cluster_nodes::{KubeScheduler, NodeGuard, create_node, delete_nodes, node, nodes_lock};
use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, test_namespace, write_rule_file as write};

const NODES: usize = 5;
const SIDE_LABEL: &str = "gang-corpus";
/// How long a held member is watched for a binding or a condition that must not come.
const HOLD: Duration = Duration::from_secs(2);

/// One side of the comparison: a scheduler, its namespace and its nodes' label value.
struct Side {
    scheduler: String,
    namespace: String,
    label: String,
    nodes: Vec<String>,
}

/// What one gang is, for both sides.
#[derive(Debug, Clone)]
struct Gang {
    name: String,
    min_count: usize,
    members: usize,
    cpu: &'static str,
    /// How it meets PreEnqueue first: none, its Workload late, members short of minCount, or a missing group.
    held: Held,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Held {
    No,
    LateWorkload,
    ShortOfMembers,
    MissingGroup,
}

/// Creates the object holding the gang's policy in the plane's Workload API (a Workload, or a PodGroup since v1.36).
async fn create_workload(client: &Client, side: &Side, gang: &Gang) {
    let (resource, object) = crate::support::gang_object(&side.namespace, &gang.name, gang.min_count as u32);
    let object: DynamicObject = serde_json::from_value(object).expect("workload");
    Api::<DynamicObject>::namespaced_with(client.clone(), &side.namespace, &resource)
        .create(&PostParams::default(), &object)
        .await
        .expect("create workload");
}

/// A member as the plane's Workload API names its group (from JSON: a typed pod of v1.37 has no `workloadRef`). A
/// member of a missing group names a group its Workload lacks (v1.35), or a PodGroup that does not exist.
async fn create_member(client: &Client, side: &Side, gang: &Gang, index: usize) {
    let (field, mut reference) = crate::support::gang_reference(&gang.name);
    if gang.held == Held::MissingGroup {
        match field {
            "workloadRef" => reference["podGroup"] = json!("other"),
            _ => reference["podGroupName"] = json!(format!("{}-other", gang.name)),
        }
    }
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{}-{index}", gang.name), "labels": {"gang": gang.name}},
        "spec": {
            "schedulerName": side.scheduler,
            "nodeSelector": {SIDE_LABEL: side.label},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "pause",
                            "resources": {"requests": {"cpu": gang.cpu, "memory": "64Mi"}}}],
        },
    });
    pod["spec"][field] = reference;
    let pod: DynamicObject = serde_json::from_value(pod).expect("pod");
    Api::<DynamicObject>::namespaced_with(client.clone(), &side.namespace, &ApiResource::erase::<Pod>(&()))
        .create(&PostParams::default(), &pod)
        .await
        .expect("create member");
}

/// A member's state: its node, or its PodScheduled=False message, or neither (pending, held or waiting at Permit).
#[derive(Debug, Clone, PartialEq)]
enum Member {
    Bound(String),
    Unschedulable(String),
    Pending,
}

async fn members(client: &Client, side: &Side, gang: &str) -> BTreeMap<String, Member> {
    Api::<Pod>::namespaced(client.clone(), &side.namespace)
        .list(&ListParams::default().labels(&format!("gang={gang}")))
        .await
        .expect("members")
        .items
        .into_iter()
        .map(|pod| {
            let name = pod.metadata.name.clone().unwrap_or_default();
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                return (name, Member::Bound(node));
            }
            let message = pod
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .and_then(|c| c.message);
            (name, message.map_or(Member::Pending, Member::Unschedulable))
        })
        .collect()
}

/// A sibling's message naming the member that failed (Ruleplane's rejected run, kube-scheduler's Permit rejection).
fn names_a_gang_member(message: &str) -> bool {
    message.contains("at plugin GangScheduling")
}

/// The condition the side's scheduler set on the gang's PodGroup after its last pod-group cycle (v1.36+): type,
/// status, reason, message and observed generation. Waits a little for it: both schedulers write it after the
/// cycle's verdict.
async fn pod_group_condition(client: &Client, side: &Side, gang: &Gang) -> Option<String> {
    let api = crate::support::control_plane().workload_api();
    if api == ruleplane_config::scheduler::gang::WorkloadApi::V1Alpha1 {
        return None;
    }
    let (resource, _) = crate::support::gang_object(&side.namespace, &gang.name, 1);
    let pod_groups = Api::<DynamicObject>::namespaced_with(client.clone(), &side.namespace, &resource);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let object = pod_groups.get(&gang.name).await.expect("the gang's PodGroup");
        let condition = object.data.pointer("/status/conditions/0").map(|c| {
            let field = |name: &str| c.get(name).map(ToString::to_string).unwrap_or_default();
            let fields = ["type", "status", "reason", "message", "observedGeneration"].map(field);
            fields.join(" ")
        });
        if condition.is_some() || Instant::now() > deadline {
            return Some(condition.unwrap_or_else(|| "no condition".to_string()));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until a gang is settled on a side: every member bound or unschedulable, or none bound and one member
/// unschedulable for its own reason (kube-scheduler's siblings then wait at Permit, with nothing written).
async fn settled(client: &Client, side: &Side, gang: &Gang) -> BTreeMap<String, Member> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = members(client, side, &gang.name).await;
        let all_decided = now.len() == gang.members && now.values().all(|m| *m != Member::Pending);
        let rejected = now.values().all(|m| !matches!(m, Member::Bound(_)))
            && now
                .values()
                .any(|m| matches!(m, Member::Unschedulable(text) if !names_a_gang_member(text)));
        if all_decided {
            return now;
        }
        // A member may fail after the quorum was allowed and before its siblings' bindings land: a rejection is
        // taken only once it has lasted.
        if rejected {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let later = members(client, side, &gang.name).await;
            if later.values().all(|m| !matches!(m, Member::Bound(_))) {
                return later;
            }
            continue;
        }
        assert!(
            Instant::now() < deadline,
            "{} did not settle gang {} on {}: {now:?}",
            side.scheduler,
            gang.name,
            side.namespace
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// After [`HOLD`], what is wrong with a held gang's members on a side: a binding or a condition.
async fn still_held(client: &Client, side: &Side, gang: &Gang) -> Option<String> {
    let now = members(client, side, &gang.name).await;
    now.values()
        .any(|m| *m != Member::Pending)
        .then(|| format!("{}: {} held by PreEnqueue, yet {now:?}", side.scheduler, gang.name))
}

async fn delete_members(client: &Client, side: &Side, gang: &str) {
    let pods = Api::<Pod>::namespaced(client.clone(), &side.namespace);
    let _ = pods
        .delete_collection(
            &DeleteParams::default().grace_period(0),
            &ListParams::default().labels(&format!("gang={gang}")),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !members(client, side, gang).await.is_empty() {
        assert!(Instant::now() < deadline, "members of {gang} not gone");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The CPU (millicores) bound to each node of a side, as a sorted list of (capacity, used): equal on both sides
/// when the same gangs went to equally loaded nodes.
async fn load(client: &Client, side: &Side, capacities: &[u64]) -> Vec<(u64, u64)> {
    let pods = Api::<Pod>::namespaced(client.clone(), &side.namespace)
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items;
    let mut load: Vec<(u64, u64)> = side
        .nodes
        .iter()
        .zip(capacities)
        .map(|(node, capacity)| {
            let used = pods
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()) == Some(node))
                .filter_map(|p| {
                    let cpu = p.spec.as_ref()?.containers[0]
                        .resources
                        .as_ref()?
                        .requests
                        .as_ref()?
                        .get("cpu")?
                        .0
                        .clone();
                    Some(match cpu.strip_suffix('m') {
                        Some(milli) => milli.parse::<u64>().ok()?,
                        None => cpu.parse::<u64>().ok()? * 1000,
                    })
                })
                .sum();
            (*capacity, used)
        })
        .collect();
    load.sort_unstable();
    load
}

/// What a settled gang shows: how many members are bound, and the texts of members unschedulable for their own
/// reason (not a sibling's), sorted.
fn outcome(members: &BTreeMap<String, Member>) -> (usize, Vec<String>) {
    let bound = members.values().filter(|m| matches!(m, Member::Bound(_))).count();
    let mut texts: Vec<String> = members
        .values()
        .filter_map(|m| match m {
            Member::Unschedulable(text) if !names_a_gang_member(text) => Some(text.clone()),
            _ => None,
        })
        .collect();
    texts.sort();
    texts.dedup();
    (bound, texts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gangs_are_placed_as_kube_scheduler_places_them_on_a_random_corpus() {
    let count: usize = std::env::var("RULEPLANE_GANG_CORPUS_GANGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var("RULEPLANE_GANG_CORPUS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2026);
    let mut rng = SplitMix64::new(seed);
    // How long placed gangs run is drawn apart, so that the gangs themselves are the same for a seed whatever the
    // ties broken on the way.
    let mut lifetimes = SplitMix64::new(seed.wrapping_add(1));
    let _nodes = nodes_lock().await;
    let client = admin_client().await;
    let run = format!("{}-{seed}", std::process::id());
    let capacities: Vec<u64> = (0..NODES).map(|_| [2000, 3000, 4000][rng.below(3)]).collect();
    let mut sides = Vec::new();
    let mut created = NodeGuard::default();
    for side in ["rp", "ks"] {
        let namespace = test_namespace(&client, &format!("gang-corpus-{side}")).await;
        let label = format!("{run}-{side}");
        let mut nodes = Vec::new();
        for (index, capacity) in capacities.iter().enumerate() {
            let name = format!("gc-{run}-{side}-{index}");
            let cpu = format!("{capacity}m");
            nodes.push(
                create_node(
                    &client,
                    node(&name, &cpu, "64Gi", json!({SIDE_LABEL: label}), json!([])),
                )
                .await,
            );
            created.push(name);
        }
        sides.push(Side {
            scheduler: format!("gang-corpus-{side}-{run}"),
            namespace,
            label,
            nodes,
        });
    }
    let dir = temp_dir(&format!("gang-corpus-{run}"));
    write(
        &dir,
        "policy.yaml",
        &format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: SchedulerPolicy\nmetadata: {{ name: gang-corpus }}\n\
             spec: {{ schedulerName: {} }}\n",
            sides[0].scheduler
        ),
    );
    let manager = ManagerProcess::start(&dir, &sides[0].namespace, "gang-corpus", &[]);
    // Its own directory: the manager loads every file of the rules directory.
    let kube_dir = temp_dir(&format!("gang-corpus-ks-{run}"));
    let start_kube_scheduler = || {
        KubeScheduler::start_with_gates(
            &kube_dir,
            vec![json!({"schedulerName": sides[1].scheduler})],
            Some(crate::support::control_plane().gang_gates()),
        )
    };
    let mut kube_scheduler = Some(start_kube_scheduler());
    manager.wait_ready(Duration::from_secs(60)).await;

    let started = Instant::now();
    let mut differences = Vec::new();
    let (mut placed, mut rejected, mut held, mut diverged) = (0, 0, 0, 0);
    // Placed gangs still running: each finishes (is deleted on both sides) at random before a later gang comes.
    let mut running: Vec<String> = Vec::new();
    for index in 0..count {
        let mut still_running = Vec::new();
        for name in running.drain(..) {
            if lifetimes.below(4) == 0 {
                for side in &sides {
                    delete_members(&client, side, &name).await;
                }
            } else {
                still_running.push(name);
            }
        }
        running = still_running;
        let min_count = 2 + rng.below(4);
        // Gangs 1–3 meet each PreEnqueue case, so that the small corpus has them all; then one gang in ten.
        let held_kind = match (index, rng.below(10)) {
            (1, _) | (_, 0) => Held::LateWorkload,
            (2, _) | (_, 1) => Held::ShortOfMembers,
            (3, _) | (_, 2) => Held::MissingGroup,
            _ => Held::No,
        };
        let gang = Gang {
            name: format!("g{index}"),
            min_count,
            members: min_count + usize::from(rng.below(3) == 0),
            // Gang 5's members are larger than any node, so that the small corpus has a rejection too.
            cpu: if index == 5 {
                "4500m"
            } else {
                ["500m", "1", "1500m", "2"][rng.below(4)]
            },
            held: held_kind,
        };
        // What is created before the check that PreEnqueue holds the gang, and what after.
        let first_members = match gang.held {
            Held::ShortOfMembers => gang.min_count - 1,
            _ => gang.members,
        };
        for side in &sides {
            if gang.held != Held::LateWorkload {
                create_workload(&client, side, &gang).await;
            }
            for member in 0..first_members {
                create_member(&client, side, &gang, member).await;
            }
        }
        if gang.held != Held::No {
            held += 1;
            tokio::time::sleep(HOLD).await;
            for side in &sides {
                differences.extend(still_held(&client, side, &gang).await);
            }
            for side in &sides {
                match gang.held {
                    Held::LateWorkload => create_workload(&client, side, &gang).await,
                    Held::ShortOfMembers => {
                        for member in first_members..gang.members {
                            create_member(&client, side, &gang, member).await;
                        }
                    }
                    _ => {}
                }
            }
            if gang.held == Held::MissingGroup {
                for side in &sides {
                    delete_members(&client, side, &gang.name).await;
                }
                println!("{} (minCount {min_count}, group missing): held by both", gang.name);
                continue;
            }
        }
        let ours = settled(&client, &sides[0], &gang).await;
        let theirs = settled(&client, &sides[1], &gang).await;
        let (ours, theirs) = (outcome(&ours), outcome(&theirs));
        println!(
            "{} (minCount {min_count}, {} members of {} CPU, {:?}): kube-scheduler bound {}, {:?}",
            gang.name, gang.members, gang.cpu, gang.held, theirs.0, theirs.1
        );
        // Where kube-scheduler's gang waits at Permit its failing member is the only one with a text; Ruleplane's
        // rejected run has the same failing text, so the texts compare as sets.
        if ours != theirs {
            differences.push(format!(
                "{}:\n  kube-scheduler: {theirs:?}\n  Ruleplane:      {ours:?}",
                gang.name
            ));
        }
        let whole = theirs.0 >= gang.min_count;
        let (our_condition, their_condition) = (
            pod_group_condition(&client, &sides[0], &gang).await,
            pod_group_condition(&client, &sides[1], &gang).await,
        );
        if let Some(condition) = &their_condition {
            println!("  PodGroup condition: {condition}");
        }
        // A gang placed with a member left over: kube-scheduler may try that member in a cycle of its own before its
        // informer shows the True condition it wrote, and turn it False; which depends on timing, not on the gang.
        let left_over = whole && theirs.0 < gang.members;
        if our_condition != their_condition && !left_over {
            differences.push(format!(
                "{} PodGroup condition:\n  kube-scheduler: {their_condition:?}\n  Ruleplane:      {our_condition:?}",
                gang.name
            ));
        }
        if whole {
            placed += 1;
        } else {
            rejected += 1;
        }
        let same_load = load(&client, &sides[0], &capacities).await == load(&client, &sides[1], &capacities).await;
        diverged += usize::from(whole && !same_load);
        // A rejected gang, or a placed one the nodes now disagree about, goes on both sides; a placed one keeps
        // running without its members left unschedulable (a retry must not bind them behind the next gang's back).
        if !whole || !same_load {
            // kube-scheduler v1.35.4 panics (a nil pod in the pod group's UnscheduledPods, from GangScheduling's
            // Permit) when a member of a gang whose siblings were deleted reaches Permit short of its quorum, which
            // the room freed by deleting a rejected gang's waiting members lets its failing member do: the members
            // of a rejected gang are deleted while it is stopped.
            if !whole {
                kube_scheduler = None;
            }
            for side in &sides {
                delete_members(&client, side, &gang.name).await;
            }
            if kube_scheduler.is_none() {
                kube_scheduler = Some(start_kube_scheduler());
            }
        } else {
            for side in &sides {
                let pods = Api::<Pod>::namespaced(client.clone(), &side.namespace);
                for (name, member) in members(&client, side, &gang.name).await {
                    if !matches!(member, Member::Bound(_)) {
                        let _ = pods.delete(&name, &DeleteParams::default().grace_period(0)).await;
                    }
                }
            }
            running.push(gang.name.clone());
        }
    }
    println!(
        "gang corpus: {count} gangs ({placed} placed whole, {rejected} rejected, {held} held by PreEnqueue first, \
         {diverged} removed after a tie broken differently), seed {seed}, {:.1} s, {} differences",
        started.elapsed().as_secs_f64(),
        differences.len()
    );
    drop(kube_scheduler);
    drop(manager);
    for side in &sides {
        let _ = Api::<Pod>::namespaced(client.clone(), &side.namespace)
            .delete_collection(&DeleteParams::default().grace_period(0), &ListParams::default())
            .await;
        delete_nodes(&client, &side.nodes).await;
    }
    assert!(placed > 0 && rejected > 0, "the corpus places and rejects gangs");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
