//! Active-active replicas on the real plane: the work split by shards, each child written by one replica (the
//! apiserver's audit log is the witness), a killed replica's shards taken over, scaling under a stream of updates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, control_plane, eventually, test_namespace, write_rule_file as write};

const PARENTS: usize = 3_000;
const UNITS: usize = 34;
const RULE: &str = "shard-copy";

fn copy_rule(parent_label: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: {RULE} }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, selector: {{ matchLabels: {{ shard-parent: "{parent_label}" }} }} }}
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-child" }}
        data: {{ gen: {{{{json data.gen}}}} }}
"#
    )
}

/// One write of a child as the audit log tells it.
#[derive(Debug, Clone)]
struct AuditedWrite {
    child: String,
    replica: String,
    second: String,
}

/// The writes of children in `ns` (create, patch, update that succeeded), by replica (from the user agent
/// `ruleplane/<version> (<identity>)`).
fn child_writes(audit_log: &Path, ns: &str) -> Vec<AuditedWrite> {
    let text = std::fs::read_to_string(audit_log).expect("read the apiserver's audit log");
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete")
        .filter(|event| matches!(event["verb"].as_str(), Some("create" | "patch" | "update")))
        .filter(|event| event["objectRef"]["resource"] == "configmaps" && event["objectRef"]["namespace"] == ns)
        .filter(|event| event["responseStatus"]["code"].as_u64().is_some_and(|code| code < 300))
        .filter_map(|event| {
            let child = event["objectRef"]["name"].as_str()?;
            let agent = event["userAgent"].as_str()?;
            let replica = agent
                .strip_prefix("ruleplane/")?
                .split_once(" (")?
                .1
                .trim_end_matches(')');
            Some(AuditedWrite {
                child: child.strip_suffix("-child")?.to_owned(),
                replica: replica.to_owned(),
                second: event["stageTimestamp"].as_str()?.get(..19)?.to_owned(),
            })
        })
        .collect()
}

async fn reconciles(manager: &ManagerProcess) -> f64 {
    manager
        .metric(&format!(
            "ruleplane_reconciles_total{{rule=\"{RULE}\",kind=\"Reconciler\"}}"
        ))
        .await
        .unwrap_or(0.0)
}

/// Waits until `replicas` hold every unit between them, each its fair share (34 units: 12/11/11 for three).
async fn balanced(replicas: &[&ManagerProcess], what: &str) -> Duration {
    let started = Instant::now();
    eventually(Duration::from_secs(60), what, || async {
        let mut held = Vec::new();
        for replica in replicas {
            held.push(replica.units_held().await?);
        }
        let fair = UNITS / replicas.len();
        (held.iter().sum::<usize>() == UNITS && held.iter().all(|h| (fair..=fair + 1).contains(h))).then_some(())
    })
    .await;
    started.elapsed()
}

/// Children whose `gen` equals their parent's (`expected`: the parent's last `gen`, by parent name).
async fn converged(children: &Api<ConfigMap>, expected: &BTreeMap<String, String>) -> usize {
    let Ok(list) = children
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=ruleplane"))
        .await
    else {
        return 0;
    };
    list.items
        .iter()
        .filter(|child| {
            let name = child.metadata.name.as_deref().unwrap_or_default();
            let generation = child.data.as_ref().and_then(|d| d.get("gen"));
            name.strip_suffix("-child")
                .and_then(|parent| expected.get(parent))
                .is_some_and(|want| Some(want) == generation)
        })
        .count()
}

fn parent_name(index: usize) -> String {
    format!("p-{index:05}")
}

#[tokio::test]
async fn three_replicas_share_3000_parents_each_child_written_by_one_and_scaling_loses_no_update() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "sharding").await;
    let rules = temp_dir("sharding");
    write(&rules, "rules.yaml", &copy_rule(&ns));
    let a = ManagerProcess::start(&rules, &ns, "shard-a", &[]);
    let mut b = ManagerProcess::start(&rules, &ns, "shard-b", &[]);
    let c = ManagerProcess::start(&rules, &ns, "shard-c", &[]);
    let settled = balanced(&[&a, &b, &c], "three replicas sharing the 34 units").await;
    println!("three replicas balanced {:.1} s after start", settled.as_secs_f64());

    // 3,000 parents, created 32 at a time.
    let parents: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let children = parents.clone();
    let created = Instant::now();
    futures::stream::iter(0..PARENTS)
        .map(|index| {
            let parents = parents.clone();
            let label = ns.clone();
            async move {
                let parent: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": parent_name(index), "labels": {"shard-parent": label}},
                    "data": {"gen": "0"}
                }))
                .expect("a parent");
                parents
                    .create(&PostParams::default(), &parent)
                    .await
                    .expect("create parent");
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    let mut expected: BTreeMap<String, String> = (0..PARENTS).map(|i| (parent_name(i), "0".to_owned())).collect();
    eventually(Duration::from_secs(300), "every parent's child", || async {
        (converged(&children, &expected).await == PARENTS).then_some(())
    })
    .await;
    let converge = created.elapsed();

    // Each replica reconciled about a third.
    let counts = [reconciles(&a).await, reconciles(&b).await, reconciles(&c).await];
    let total: f64 = counts.iter().sum();
    println!(
        "{PARENTS} parents converged in {:.1} s on three replicas; reconciles a/b/c: {counts:?}",
        converge.as_secs_f64()
    );
    for count in counts {
        let share = count / total;
        assert!(
            (0.2..=0.47).contains(&share),
            "a replica's share of reconciles: {counts:?}"
        );
    }
    // Each caches its own shards' parents and children only: about a third of the 6,000 objects.
    let mut cached = Vec::new();
    for replica in [&a, &b, &c] {
        let text = replica.metrics_text().await.unwrap_or_default();
        let objects: f64 = text
            .lines()
            .filter(|l| l.starts_with("ruleplane_watch_objects{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        cached.push(objects);
    }
    println!(
        "objects cached by a/b/c: {cached:?} (parents and children: {})",
        2 * PARENTS
    );
    for objects in &cached {
        assert!(
            *objects < 0.5 * (2 * PARENTS) as f64,
            "a replica caches more than its shards: {cached:?}"
        );
    }
    // The audit log: every child written, each by exactly one replica.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = child_writes(&control_plane().audit_log, &ns);
    let mut writers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for write in &writes {
        writers.entry(&write.child).or_default().insert(&write.replica);
    }
    assert_eq!(writers.len(), PARENTS, "every child written");
    let shared: Vec<_> = writers.iter().filter(|(_, by)| by.len() > 1).take(5).collect();
    assert!(
        shared.is_empty(),
        "children written by more than one replica: {shared:?}"
    );

    // kill -9 of one replica: its parents' drift repaired once its Leases expire.
    let lost = b.shards().await;
    assert!(!lost.is_empty(), "shard-b runs some shards");
    let drifted: Vec<String> = children
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=ruleplane"))
        .await
        .expect("list children")
        .items
        .into_iter()
        .filter(|child| {
            child
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("ruleplane.dev/shard"))
                .and_then(|s| s.parse::<u32>().ok())
                .is_some_and(|shard| lost.contains(&shard))
        })
        .filter_map(|child| child.metadata.name)
        .take(20)
        .collect();
    assert_eq!(drifted.len(), 20, "children of shard-b's shards");
    b.kill9();
    let killed = Instant::now();
    for name in &drifted {
        let patch = json!({"data": {"gen": "drift"}});
        children
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("hand edit");
    }
    balanced(&[&a, &c], "two replicas running every unit").await;
    let taken_over = killed.elapsed();
    let repaired = eventually(Duration::from_secs(60), "the drifted children repaired", || async {
        for name in &drifted {
            let child = children.get(name).await.ok()?;
            if child.data.as_ref().and_then(|d| d.get("gen")).map(String::as_str) != Some("0") {
                return None;
            }
        }
        Some(killed.elapsed())
    })
    .await;
    println!(
        "kill -9 of shard-b: its {} shards taken over after {:.1} s, drift repaired after {:.1} s (lease 15 s)",
        lost.len(),
        taken_over.as_secs_f64(),
        repaired.as_secs_f64()
    );
    assert!(
        repaired <= Duration::from_secs(17 + 3),
        "drift repaired {repaired:?} after the kill: lease (15 s) + 2 s, and 3 s for the relist and the writes"
    );

    // Back to 3, then 3 → 4 → 2 under a steady stream of parent updates: no child written by two replicas in one
    // second, no update lost.
    let scale_started = Instant::now();
    let last: Arc<Mutex<BTreeMap<String, String>>> = Arc::new(Mutex::new(BTreeMap::new()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let updater = {
        let parents = parents.clone();
        let last = last.clone();
        tokio::spawn(async move {
            let mut generation = 1_u64;
            while !*stop_rx.borrow() {
                let batch: Vec<u64> = (generation..generation + 8).collect();
                generation += 8;
                futures::future::join_all(batch.into_iter().map(|g| {
                    let parents = parents.clone();
                    let last = last.clone();
                    async move {
                        let name = parent_name(usize::try_from(g).unwrap_or(0) * 7 % PARENTS);
                        let patch = json!({"data": {"gen": g.to_string()}});
                        if parents
                            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .is_ok()
                        {
                            let mut last = last.lock().expect("last");
                            let newer = last
                                .get(&name)
                                .and_then(|v| v.parse::<u64>().ok())
                                .is_none_or(|v| v < g);
                            if newer {
                                last.insert(name, g.to_string());
                            }
                        }
                    }
                }))
                .await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let e = ManagerProcess::start(&rules, &ns, "shard-e", &[]);
    let three = balanced(&[&a, &c, &e], "three replicas again").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut d = ManagerProcess::start(&rules, &ns, "shard-d", &[]);
    let mut a = a;
    let up = balanced(&[&a, &c, &d, &e], "four replicas sharing the units").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let queued: f64 = {
        let text = c.metrics_text().await.unwrap_or_default();
        let depths: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with("ruleplane_shard_queue_depth{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        assert!(!depths.is_empty(), "per-shard queue depths published");
        depths.iter().sum()
    };
    assert!(a.sigterm().success(), "a SIGTERM ends the replica cleanly");
    assert!(d.sigterm().success(), "a SIGTERM ends the replica cleanly");
    let down = balanced(&[&c, &e], "two replicas again").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_tx.send_replace(true);
    updater.await.expect("updater");
    expected.extend(last.lock().expect("last").clone());
    let updates = last.lock().expect("last").len();
    eventually(
        Duration::from_secs(120),
        "every child at its parent's last update",
        || async { (converged(&children, &expected).await == PARENTS).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let scale_writes: Vec<AuditedWrite> = child_writes(&control_plane().audit_log, &ns)
        .into_iter()
        .skip(writes.len())
        .collect();
    let mut per_second: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for write in &scale_writes {
        per_second
            .entry((&write.child, &write.second))
            .or_default()
            .insert(&write.replica);
    }
    let overlaps: Vec<_> = per_second.iter().filter(|(_, by)| by.len() > 1).take(5).collect();
    let replicas: BTreeSet<&str> = scale_writes.iter().map(|w| w.replica.as_str()).collect();
    println!(
        "scaling 2 → 3 ({:.1} s to balance) → 4 ({:.1} s) → 2 ({:.1} s) under {updates} updated parents over {:.1} s \
         (shard-c's queues held {queued} parents at 4): {} child writes by {replicas:?}, children written by two \
         replicas in one second: {}",
        three.as_secs_f64(),
        up.as_secs_f64(),
        down.as_secs_f64(),
        scale_started.elapsed().as_secs_f64(),
        scale_writes.len(),
        overlaps.len()
    );
    assert!(
        overlaps.is_empty(),
        "children written by two replicas in the same second: {overlaps:?}"
    );
    assert!(
        replicas.len() >= 3,
        "the replicas that came and went wrote too: {replicas:?}"
    );
}
