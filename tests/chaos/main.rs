//! Chaos soak on a control plane of its own (restarting its kube-apiserver would fail the integration tests that
//! share theirs): three replicas sharing a Reconciler with a collection and a SchedulerPolicy, under a stream of
//! parent changes and pods, while a seeded random order of faults hits them — kill -9, SIGTERM, SIGSTOP past the
//! lease, kube-apiserver down past the lease, etcd compacted, etcd restarted. Afterwards the children match their
//! parents, children never asked away were never recreated, a frozen replica wrote nothing once its units were
//! taken, no replica panicked or grew past 300 MiB, every replica is a member again with its fair share, every pod
//! was bound exactly once, no node was overcommitted and every gang was bound whole.
//!
//! `RULEPLANE_SOAK_SECONDS` (default 150) is how long faults go on; `RULEPLANE_SOAK_SEED` replays an order of
//! faults and changes; `RULEPLANE_SOAK_BINARY` runs another build of `ruleplane` under them. `make soak` runs it
//! for 30 minutes.

// The integration tests' harness; the soak uses part of it.
#[expect(dead_code, reason = "the soak uses part of the integration tests' support")]
#[path = "../integration/support/mod.rs"]
mod support;

mod audit;
mod faults;
mod parents;
mod pods;
mod replicas;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use faults::{Fault, Rng, plane};
use replicas::{Replicas, UNITS, balanced, holdings, members, units_held};
use support::manager::temp_dir;
use support::{admin_client, control_plane, eventually, eventually_seen, test_namespace, write_rule_file};

const PARENTS: usize = 150;
const SCHEDULER: &str = "soak-scheduler";
/// A replica's peak resident memory must stay under this.
const RSS_LIMIT_KIB: u64 = 300 * 1024;
/// After the faults stop, how long everything is given to settle.
const SETTLE: Duration = Duration::from_secs(60);

/// A SIGSTOP as it happened: when the others held every unit between them, when it resumed, when it held a unit again.
struct Freeze {
    identity: String,
    taken: Option<Timestamp>,
    resumed: Timestamp,
    rejoined: Option<Timestamp>,
}

/// One line of the summary: a check's name, and what it saw (`Err`: the failure).
struct Check {
    name: &'static str,
    outcome: Result<String, String>,
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_and_scheduler_keep_their_guarantees_through_kills_freezes_outages_and_compaction() {
    let soak = Duration::from_secs(env_number("RULEPLANE_SOAK_SECONDS").unwrap_or(150));
    let seed = env_number("RULEPLANE_SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    println!(
        "chaos soak: faults for {} s, seed {seed} (RULEPLANE_SOAK_SEED={seed} replays it)",
        soak.as_secs()
    );
    let mut rng = Rng::new(seed);
    let plane_dir = control_plane().kubeconfig.parent().map(|d| d.display().to_string());
    println!("control plane in {}", plane_dir.unwrap_or_default());
    let client = admin_client().await;
    let ns = test_namespace(&client, "chaos").await;
    let nodes = pods::create_nodes(&client, &ns).await;
    let rules = temp_dir("chaos");
    write_rule_file(&rules, "rules.yaml", &parents::rules(SCHEDULER));
    let mut replicas = Replicas::start(&rules, &ns);
    let started = Instant::now();
    eventually(
        Duration::from_secs(90),
        "three replicas sharing the 34 units",
        || async { balanced(&holdings(&replicas.running()).await).then_some(()) },
    )
    .await;
    println!(
        "three replicas balanced {:.1} s after start",
        started.elapsed().as_secs_f64()
    );

    // The first parents and their children; the children's UIDs are the ones that must survive.
    let api = parents::parents(&client, &ns);
    eventually(Duration::from_secs(60), "the Soak kind served", || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    let stream = Arc::new(Mutex::new(parents::Stream::default()));
    parents::create_initial(&api, &stream, PARENTS).await;
    let (first_children, _) = eventually_seen(Duration::from_secs(180), "the first parents' children", || {
        parents::converged(&client, &api, &ns)
    })
    .await;
    let first = parents::children(&client, &ns).await.expect("list the first children");
    println!(
        "{PARENTS} parents, {first_children} children converged {:.1} s after start",
        started.elapsed().as_secs_f64()
    );

    // The streams: parent changes, pods, and samples of the nodes.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let changes = tokio::spawn(parents::run_stream(
        api.clone(),
        stream.clone(),
        rng.next(),
        stop_rx.clone(),
    ));
    let pod_stats = Arc::new(Mutex::new(pods::PodStats::default()));
    let pod_stream = tokio::spawn(pods::run_stream(
        client.clone(),
        ns.clone(),
        SCHEDULER.to_owned(),
        pod_stats.clone(),
        rng.next(),
        stop_rx.clone(),
    ));
    let (sampling_tx, sampling_rx) = tokio::sync::watch::channel(false);
    let sampler = {
        let (client, ns, stats) = (client.clone(), ns.clone(), pod_stats.clone());
        tokio::spawn(async move {
            while !*sampling_rx.borrow() {
                pods::sample(&client, &ns, &stats).await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        })
    };

    // The faults, a round of every kind at a time in a random order, until the soak's time is up (one round at least).
    let faulting = Instant::now();
    let mut injected: Vec<String> = Vec::new();
    let mut freezes: Vec<Freeze> = Vec::new();
    let mut plane_errors: Vec<String> = Vec::new();
    let mut sigterm_failures: Vec<String> = Vec::new();
    let mut first_round = true;
    while first_round || faulting.elapsed() < soak {
        first_round = false;
        for fault in rng.round() {
            if !injected.is_empty() && faulting.elapsed() >= soak {
                break;
            }
            let at = faulting.elapsed().as_secs_f64();
            let slot = rng.below(replicas.len());
            let identity = replicas.identity(slot);
            let what = match fault {
                Fault::Kill9 => {
                    replicas.kill9(slot);
                    let down = rng.seconds(1, 8);
                    tokio::time::sleep(down).await;
                    replicas.restart(slot);
                    format!(
                        "kill -9 {identity}, restarted as {} {} s later",
                        replicas.identity(slot),
                        down.as_secs()
                    )
                }
                Fault::Sigterm => {
                    match replicas.sigterm(slot) {
                        Some(status) if status.success() => {}
                        other => sigterm_failures.push(format!("{identity}: {other:?}")),
                    }
                    let down = rng.seconds(1, 5);
                    tokio::time::sleep(down).await;
                    replicas.restart(slot);
                    format!(
                        "SIGTERM {identity}, restarted as {} {} s later",
                        replicas.identity(slot),
                        down.as_secs()
                    )
                }
                Fault::Freeze => {
                    let hold = rng.seconds(17, 22);
                    let freeze = freeze(&replicas, slot, hold).await;
                    let text = format!(
                        "SIGSTOP {identity} for {} s: units taken {}, a unit held again {} after SIGCONT",
                        hold.as_secs(),
                        freeze.taken.map_or("never".to_owned(), |t| format!(
                            "{:.1} s into it",
                            seconds_between(t, freeze.resumed, hold)
                        )),
                        freeze.rejoined.map_or("never (45 s)".to_owned(), |r| format!(
                            "{:.1} s",
                            r.duration_since(freeze.resumed).as_secs_f64()
                        )),
                    );
                    freezes.push(freeze);
                    text
                }
                Fault::ApiserverOutage => {
                    let hold = rng.seconds(17, 24);
                    if let Err(e) = plane(&["stop", "kube-apiserver"]).await {
                        plane_errors.push(e);
                    }
                    tokio::time::sleep(hold).await;
                    let restarted = Instant::now();
                    if let Err(e) = plane(&["start", "kube-apiserver"]).await {
                        plane_errors.push(e);
                    }
                    format!(
                        "kube-apiserver stopped for {} s (+{:.1} s to serve again)",
                        hold.as_secs(),
                        restarted.elapsed().as_secs_f64()
                    )
                }
                Fault::Compaction => {
                    let revision = plane(&["compact"]).await;
                    let restarted = Instant::now();
                    if let Err(e) = plane(&["restart", "kube-apiserver"]).await {
                        plane_errors.push(e);
                    }
                    match revision {
                        Ok(revision) => format!(
                            "etcd compacted at revision {revision}, kube-apiserver restarted ({:.1} s)",
                            restarted.elapsed().as_secs_f64()
                        ),
                        Err(e) => {
                            plane_errors.push(e);
                            "etcd compaction failed".to_owned()
                        }
                    }
                }
                Fault::EtcdRestart => {
                    let restarted = Instant::now();
                    if let Err(e) = plane(&["restart", "etcd"]).await {
                        plane_errors.push(e);
                    }
                    format!("etcd restarted ({:.1} s)", restarted.elapsed().as_secs_f64())
                }
            };
            println!("[{at:6.1} s] {what}");
            injected.push(what);
            let gap = rng.seconds(5, 15);
            tokio::time::sleep(gap).await;
        }
    }
    let faulted_for = faulting.elapsed();
    stop_tx.send_replace(true);
    changes.await.expect("the change stream");
    pod_stream.await.expect("the pod stream");
    println!(
        "faults stopped after {:.1} s; settling (up to {} s)",
        faulted_for.as_secs_f64(),
        SETTLE.as_secs()
    );

    // Settling: membership, children, pods, all given the same minute.
    let settling = Instant::now();
    let complete_gangs = pod_stats.lock().expect("stats").complete_gangs.clone();
    let mut membership: Result<String, String> = Err("not looked at".to_owned());
    let mut children: Result<String, String> = Err("not looked at".to_owned());
    let mut bound: Result<String, String> = Err("not looked at".to_owned());
    loop {
        if membership.is_err() {
            membership = rejoined(&replicas)
                .await
                .map(|seen| format!("{seen} after {:.1} s", settling.elapsed().as_secs_f64()));
        }
        if children.is_err() {
            children = parents::converged(&client, &api, &ns).await.map(|(n, collecting)| {
                format!(
                    "{n} children match their parents after {:.1} s ({collecting} of deleted parents, with their \
                     owner reference, still awaiting the garbage collector)",
                    settling.elapsed().as_secs_f64()
                )
            });
        }
        if bound.is_err() {
            bound = pods::all_bound(&client, &ns, &complete_gangs).await.map(|n| {
                format!(
                    "{n} pods bound after {:.1} s ({} complete gangs among them)",
                    settling.elapsed().as_secs_f64(),
                    complete_gangs.len()
                )
            });
        }
        if (membership.is_ok() && children.is_ok() && bound.is_ok()) || settling.elapsed() > SETTLE {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    sampling_tx.send_replace(true);
    sampler.await.expect("the sampler");
    // The audit log is written in batches of a second.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes = audit::writes(&control_plane().audit_log, &ns);

    let mut checks = vec![
        Check {
            name: "every replica a member again and ready, holding its fair share of the 34 units",
            outcome: membership,
        },
        Check {
            name: "every child at its parent's last spec, none left over",
            outcome: children,
        },
        Check {
            name: "every pod bound, every gang whole",
            outcome: bound,
        },
    ];
    // The streams have ended: what they recorded is the soak's now.
    let stream = std::mem::take(&mut *stream.lock().expect("stream"));
    checks.push(Check {
        name: "children never asked away were never recreated",
        outcome: match parents::children(&client, &ns).await {
            Ok(now) => {
                let recreated = parents::recreated(&first, &now, &stream);
                if recreated.is_empty() {
                    Ok(format!(
                        "{} first children kept their UIDs or were asked away",
                        first.len()
                    ))
                } else {
                    Err(format!(
                        "{} recreated or gone: {:?}",
                        recreated.len(),
                        &recreated[..recreated.len().min(8)]
                    ))
                }
            }
            Err(e) => Err(e),
        },
    });
    checks.push(frozen_wrote_nothing(&freezes, &writes));
    let incarnations = replicas.incarnations();
    let panicked: Vec<String> = incarnations
        .iter()
        .flat_map(|i| i.panics.iter().map(move |p| format!("{}: {p}", i.identity)))
        .collect();
    checks.push(Check {
        name: "no replica panicked",
        outcome: if panicked.is_empty() {
            Ok(format!("{} incarnations' logs read", incarnations.len()))
        } else {
            Err(panicked[..panicked.len().min(5)].join("; "))
        },
    });
    let peaks: Vec<String> = incarnations
        .iter()
        .map(|i| {
            format!(
                "{} {}",
                i.identity,
                i.peak_rss_kib.map_or("?".to_owned(), |k| format!("{} MiB", k / 1024))
            )
        })
        .collect();
    let over: Vec<&String> = incarnations
        .iter()
        .zip(&peaks)
        .filter(|(i, _)| i.peak_rss_kib.is_none_or(|k| k >= RSS_LIMIT_KIB))
        .map(|(_, p)| p)
        .collect();
    checks.push(Check {
        name: "every replica's peak RSS under 300 MiB",
        outcome: if over.is_empty() {
            Ok(peaks.join(", "))
        } else {
            Err(format!("{over:?} (all: {peaks:?})"))
        },
    });
    checks.push(Check {
        name: "a SIGTERM ends a replica with 0",
        outcome: if sigterm_failures.is_empty() {
            Ok("all".to_owned())
        } else {
            Err(sigterm_failures.join("; "))
        },
    });
    checks.push(Check {
        name: "cluster.sh stopped, started, restarted and compacted the plane",
        outcome: if plane_errors.is_empty() {
            Ok("every command".to_owned())
        } else {
            Err(plane_errors.join("; "))
        },
    });
    let bindings = pods::bindings(&writes);
    let bound_now = pods::bound_now(&client, &ns).await;
    checks.push(Check {
        name: "every pod bound exactly once (audit log)",
        outcome: match bound_now {
            Ok(now) => {
                let once: std::collections::BTreeMap<&str, usize> = writes
                    .iter()
                    .filter(|w| w.resource == "pods" && w.subresource == "binding" && w.succeeded())
                    .fold(Default::default(), |mut counts, w| {
                        *counts.entry(w.name.as_str()).or_default() += 1;
                        counts
                    });
                let not_once: Vec<String> = now
                    .iter()
                    .filter(|pod| once.get(pod.as_str()) != Some(&1))
                    .map(|pod| format!("{pod}: {} bindings", once.get(pod.as_str()).copied().unwrap_or(0)))
                    .collect();
                if bindings.twice.is_empty() && not_once.is_empty() {
                    Ok(format!(
                        "{} pods bound over the run, by {:?}; {} binding requests refused",
                        bindings.bound_pods,
                        bindings.by_replica,
                        bindings.refused.len()
                    ))
                } else {
                    Err(format!(
                        "bound twice: {:?}; bound now without exactly one binding: {not_once:?}",
                        bindings.twice
                    ))
                }
            }
            Err(e) => Err(e),
        },
    });
    let stats = std::mem::take(&mut *pod_stats.lock().expect("stats"));
    checks.push(Check {
        name: "no node overcommitted",
        outcome: if stats.samples > 0 && stats.overcommits.is_empty() {
            Ok(format!(
                "{} samples of {} nodes; the busiest held {:.0} % of its CPU",
                stats.samples,
                nodes.len(),
                stats.peak_cpu_share * 100.0
            ))
        } else {
            Err(format!(
                "{} samples; overcommitted: {:?}",
                stats.samples,
                &stats.overcommits[..stats.overcommits.len().min(5)]
            ))
        },
    });

    // The summary.
    println!("\n==== chaos soak summary (seed {seed}) ====");
    println!(
        "faults: {} in {:.0} s ({}), then settled for up to {} s",
        injected.len(),
        faulted_for.as_secs_f64(),
        Fault::ALL
            .iter()
            .map(|f| format!("{f:?} ×{}", injected_count(&injected, *f)))
            .collect::<Vec<_>>()
            .join(", "),
        SETTLE.as_secs()
    );
    for (i, what) in injected.iter().enumerate() {
        println!("  {:2}. {what}", i + 1);
    }
    println!(
        "parent changes: {} asked, {} answered ({:?}); parents deleted: {}, items removed: {}",
        stream.asked_changes.values().map(|(asked, _)| asked).sum::<u64>(),
        stream.changes_succeeded(),
        stream.asked_changes,
        stream.deleted.len(),
        stream.removed.len()
    );
    println!(
        "pods: {} created ({} creations failed), {} deleted; gangs: {} started, {} complete at the end; \
         complete gangs seen partly bound in {} samples (between their members' bindings)",
        stats.created,
        stats.create_failed,
        stats.deleted,
        stats.gangs_started,
        complete_gangs.len(),
        stats.partial_gang_samples
    );
    println!(
        "replica incarnations: {}; log lines about expired watches (410): {}",
        incarnations
            .iter()
            .map(|i| i.identity.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        incarnations.iter().map(|i| i.expired_watches).sum::<usize>()
    );
    let failed = checks.iter().filter(|c| c.outcome.is_err()).count();
    println!("checks: {} passed, {failed} failed", checks.len() - failed);
    for check in &checks {
        match &check.outcome {
            Ok(seen) => println!("  [ok]   {}: {seen}", check.name),
            Err(seen) => println!("  [FAIL] {}: {seen}", check.name),
        }
    }
    support::cluster_nodes::delete_nodes(&client, &nodes).await;
    let failures: Vec<String> = checks
        .iter()
        .filter_map(|c| c.outcome.as_ref().err().map(|e| format!("{}: {e}", c.name)))
        .collect();
    assert!(
        failures.is_empty(),
        "chaos soak (seed {seed}) failed:\n{}",
        failures.join("\n")
    );
}

fn injected_count(injected: &[String], fault: Fault) -> usize {
    let sign = match fault {
        Fault::Kill9 => "kill -9",
        Fault::Sigterm => "SIGTERM",
        Fault::Freeze => "SIGSTOP",
        Fault::ApiserverOutage => "kube-apiserver stopped",
        Fault::Compaction => "etcd compact",
        Fault::EtcdRestart => "etcd restarted",
    };
    injected.iter().filter(|w| w.starts_with(sign)).count()
}

/// From SIGSTOP to `taken`, given the SIGCONT at `resumed` after `hold`.
fn seconds_between(taken: Timestamp, resumed: Timestamp, hold: Duration) -> f64 {
    hold.as_secs_f64() - resumed.duration_since(taken).as_secs_f64()
}

/// SIGSTOP of the slot's replica for `hold`, watching the others take its units, then SIGCONT and up to 45 s for
/// it to hold a unit again.
async fn freeze(replicas: &Replicas, slot: usize, hold: Duration) -> Freeze {
    let identity = replicas.identity(slot);
    let others: Vec<_> = (0..replicas.len())
        .filter(|other| *other != slot)
        .filter_map(|other| replicas.process(other))
        .collect();
    // Its metrics answer from where it stopped right after SIGCONT: what tells it holds a unit again is a Lease it
    // acquired since (or, without the counter, holding one after holding none).
    let acquired_before = acquired(replicas.process(slot).expect("a running replica")).await;
    replicas.signal(slot, "STOP");
    let until = Instant::now() + hold;
    let mut taken = None;
    while Instant::now() < until {
        if taken.is_none() {
            let held = holdings(&others).await;
            if held.iter().all(Option::is_some) && held.iter().flatten().sum::<usize>() == UNITS {
                taken = Some(Timestamp::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    replicas.signal(slot, "CONT");
    let resumed = Timestamp::now();
    let frozen = replicas.process(slot).expect("the frozen replica");
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut rejoined = None;
    let mut held_none = false;
    while Instant::now() < deadline {
        let held = units_held(frozen).await;
        held_none |= held == Some(0);
        let acquired_since = match (acquired_before, acquired(frozen).await) {
            (Some(before), Some(now)) => now > before,
            _ => false,
        };
        if acquired_since || (held_none && held.is_some_and(|held| held > 0)) {
            rejoined = Some(Timestamp::now());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Freeze {
        identity,
        taken,
        resumed,
        rejoined,
    }
}

/// Unit Leases the replica acquired since it started (`None`: no answer).
async fn acquired(replica: &support::manager::ManagerProcess) -> Option<f64> {
    let sample = "ruleplane_unit_transitions_total{result=\"acquired\"}";
    let text = tokio::time::timeout(Duration::from_secs(2), replica.metrics_text())
        .await
        .ok()??;
    // A replica that never acquired a Lease has no such sample yet.
    Some(
        text.lines()
            .find_map(|l| l.strip_prefix(sample).and_then(|rest| rest.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0),
    )
}

/// A frozen replica's writes once the others held every unit, until it held a unit again (less the 100 ms between
/// two looks at its metrics, and a margin): there must be none.
fn frozen_wrote_nothing(freezes: &[Freeze], writes: &[audit::Write]) -> Check {
    let name = "a frozen replica wrote nothing once its units were taken (audit log)";
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for freeze in freezes {
        let Some(taken) = freeze.taken else {
            seen.push(format!(
                "{}: units never all taken by the others, nothing to check",
                freeze.identity
            ));
            continue;
        };
        let end = freeze
            .rejoined
            .map_or(freeze.resumed + SignedDuration::from_secs(45), |r| {
                r - SignedDuration::from_millis(300)
            });
        let late: Vec<String> = writes
            .iter()
            .filter(|w| w.replica.as_deref() == Some(freeze.identity.as_str()))
            .filter(|w| w.received >= taken && w.received <= end)
            .map(|w| {
                format!(
                    "{} {}{} {} ({}) {:.3} s after SIGCONT",
                    w.verb,
                    w.resource,
                    if w.subresource.is_empty() {
                        String::new()
                    } else {
                        format!("/{}", w.subresource)
                    },
                    w.name,
                    w.code,
                    w.received.duration_since(freeze.resumed).as_secs_f64()
                )
            })
            .collect();
        let writes_after = writes
            .iter()
            .filter(|w| w.replica.as_deref() == Some(freeze.identity.as_str()) && w.received > end)
            .count();
        if late.is_empty() {
            seen.push(format!(
                "{}: none in the {:.1} s from the takeover to holding a unit again ({writes_after} writes after)",
                freeze.identity,
                end.duration_since(taken).as_secs_f64()
            ));
        } else {
            wrong.push(format!(
                "{}: {} writes: {:?}",
                freeze.identity,
                late.len(),
                &late[..late.len().min(6)]
            ));
        }
    }
    Check {
        name,
        outcome: if wrong.is_empty() {
            Ok(if seen.is_empty() {
                "no freeze injected".to_owned()
            } else {
                seen.join("; ")
            })
        } else {
            Err(wrong.join("; "))
        },
    }
}

/// `Ok` once the three replicas hold every unit in fair shares and each counts three members; else what it saw.
async fn rejoined(replicas: &Replicas) -> Result<String, String> {
    let running = replicas.running();
    let held = holdings(&running).await;
    let mut counted = Vec::new();
    for replica in &running {
        counted.push(members(replica).await);
    }
    let members_ok = counted.iter().all(|m| *m == Some(running.len() as f64));
    // Each is ready and says it is a member (`/readyz?verbose`): a replica left out must not look healthy.
    let mut unready = Vec::new();
    for replica in &running {
        match replica.readyz().await {
            Some((200, body)) if body.contains("[+] member") => {}
            other => unready.push(format!("{}: {other:?}", replica.identity)),
        }
    }
    if balanced(&held) && members_ok && unready.is_empty() {
        Ok(format!(
            "units held {held:?}, members counted {counted:?}, every replica ready as a member"
        ))
    } else {
        Err(format!(
            "units held {held:?} (of {UNITS}), members counted {counted:?}, not ready as members: {unready:?}"
        ))
    }
}
