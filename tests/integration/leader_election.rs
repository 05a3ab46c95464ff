//! A replica whose connection to the apiserver stalls: its units' work stops on its own timer before another
//! replica takes the units over, and it rejoins once the connection heals.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::support::manager::{ManagerProcess, temp_dir};
use crate::support::{admin_client, control_plane, eventually, test_namespace, write_rule_file as write};

/// What the proxy does with the bytes of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flow {
    /// Bytes read are held, not forwarded, in both directions: to both ends the connection just hangs.
    stalled: bool,
    /// Connections accepted under an earlier epoch are closed, and the bytes they hold dropped, not delivered.
    epoch: u64,
}

/// A TCP proxy to the apiserver that the test can stall (a partitioned replica: every request hangs, nothing is
/// refused) and whose connections it can cut. TLS passes through untouched: the serving certificate names
/// 127.0.0.1, which the proxy listens on too.
struct StallingProxy {
    address: SocketAddr,
    flow: watch::Sender<Flow>,
    accept: tokio::task::JoinHandle<()>,
}

impl StallingProxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let address = listener.local_addr().expect("proxy address");
        let (flow, _) = watch::channel(Flow {
            stalled: false,
            epoch: 0,
        });
        let flows = flow.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let flow = flows.subscribe();
                tokio::spawn(async move {
                    let epoch = flow.borrow().epoch;
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    // Either direction ending ends the connection.
                    tokio::select! {
                        _ = pipe(client_read, server_write, flow.clone(), epoch) => {}
                        _ = pipe(server_read, client_write, flow, epoch) => {}
                    }
                });
            }
        });
        StallingProxy { address, flow, accept }
    }

    fn stall(&self) {
        self.flow.send_modify(|f| f.stalled = true);
    }

    /// Closes every connection, dropping what it holds; new connections stay stalled.
    fn cut(&self) {
        self.flow.send_modify(|f| f.epoch += 1);
    }

    /// Forwards again, on new connections only: nothing held during the stall is ever delivered.
    fn heal(&self) {
        self.flow.send_modify(|f| {
            f.epoch += 1;
            f.stalled = false;
        });
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut flow: watch::Receiver<Flow>,
    epoch: u64,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = flow.wait_for(|f| f.epoch != epoch) => return,
        };
        // Held while stalled; dropped with the connection when cut.
        let forward = flow
            .wait_for(|f| f.epoch != epoch || !f.stalled)
            .await
            .is_ok_and(|f| f.epoch == epoch);
        if !forward || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The apiserver's address, from the admin kubeconfig's `server: https://127.0.0.1:PORT`.
fn apiserver_address(kubeconfig: &Path) -> (String, SocketAddr) {
    let text = std::fs::read_to_string(kubeconfig).expect("read kubeconfig");
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .map(|s| s.trim().to_owned())
        .expect("a server in the kubeconfig");
    let address = server
        .strip_prefix("https://")
        .and_then(|hostport| hostport.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("server {server} is not https://IP:PORT"));
    (server, address)
}

/// The admin kubeconfig, pointed at `proxy` instead of the apiserver.
fn proxied_kubeconfig(dir: &Path, proxy: SocketAddr) -> PathBuf {
    let admin = &control_plane().kubeconfig;
    let (server, _) = apiserver_address(admin);
    let text = std::fs::read_to_string(admin).expect("read kubeconfig");
    let path = dir.join("proxied.kubeconfig");
    std::fs::write(&path, text.replace(&server, &format!("https://{proxy}"))).expect("write kubeconfig");
    path
}

/// A rule copying each parent's `gen` into a child that also names the replica's rule set (`writer`), so every
/// child write at the apiserver says which replica made it.
fn copy_rule(parent_label: &str, writer: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: stall-copy }}
spec:
  for: {{ apiVersion: v1, kind: ConfigMap, selector: {{ matchLabels: {{ stall-parent: "{parent_label}" }} }} }}
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-copy" }}
        data: {{ writer: {writer}, gen: {{{{json data.gen}}}} }}
"#
    )
}

/// A child write as the apiserver ordered it.
#[derive(Debug, Clone)]
struct ChildWrite {
    version: u64,
    name: String,
    writer: String,
    /// The parent's shard, from the child's label.
    shard: Option<u32>,
    seen: Instant,
}

/// Records every change of the children in `ns`, once per resourceVersion, from a direct connection.
fn record_child_writes(client: kube::Client, ns: &str) -> (Arc<Mutex<Vec<ChildWrite>>>, tokio::task::JoinHandle<()>) {
    let writes = Arc::new(Mutex::new(Vec::new()));
    let log = writes.clone();
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let task = tokio::spawn(async move {
        let config = watcher::Config::default().labels("app.kubernetes.io/managed-by=ruleplane");
        let stream = watcher::watcher(api, config).applied_objects();
        futures::pin_mut!(stream);
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        while let Some(item) = stream.next().await {
            let Ok(child) = item else { continue };
            let name = child.metadata.name.clone().unwrap_or_default();
            let version: u64 = child
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if last.get(&name) == Some(&version) {
                continue; // a relist repeating what was seen
            }
            last.insert(name.clone(), version);
            let writer = child
                .data
                .as_ref()
                .and_then(|d| d.get("writer").cloned())
                .unwrap_or_default();
            let shard = child
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("ruleplane.dev/shard"))
                .and_then(|s| s.parse().ok());
            log.lock().expect("writes").push(ChildWrite {
                version,
                name,
                writer,
                shard,
                seen: Instant::now(),
            });
        }
    });
    (writes, task)
}

fn rule_line_standby(body: &str) -> bool {
    body.contains("rule stall-copy (Reconciler): standby")
}

/// The realistic failure: a replica is partitioned from the apiserver (every request it sends hangs, writes it
/// already sent may still be in the network). Its units' work must stop — on its own timer, since no request
/// answers — before the other replica takes them over, and no write of the stalled replica may land after the
/// other's first write on those units.
#[tokio::test]
async fn a_replica_whose_connection_stalls_stops_its_units_before_another_takes_them_over() {
    let client = admin_client().await;
    let ns = test_namespace(&client, "election-stall").await;
    let (_, apiserver) = apiserver_address(&control_plane().kubeconfig);
    let proxy = StallingProxy::start(apiserver).await;

    let rules_a = temp_dir("stall-a");
    let rules_b = temp_dir("stall-b");
    write(&rules_a, "rules.yaml", &copy_rule(&ns, "a"));
    write(&rules_b, "rules.yaml", &copy_rule(&ns, "b"));
    let kubeconfig_a = proxied_kubeconfig(&rules_a, proxy.address);
    let old = ManagerProcess::start_as(&kubeconfig_a, &rules_a, &ns, "stall-a", &[]);
    old.wait_ready(Duration::from_secs(40)).await;
    let other = ManagerProcess::start(&rules_b, &ns, "stall-b", &[]);
    other.wait_ready(Duration::from_secs(40)).await;
    eventually(
        Duration::from_secs(40),
        "the two replicas sharing the units",
        || async {
            let (a, b) = (old.units_held().await?, other.units_held().await?);
            (a + b == 34 && a >= 17 && b >= 17).then_some(())
        },
    )
    .await;
    let stalled_shards = old.shards().await;

    // Parents whose `gen` changes every 50 ms, from a direct connection, for the whole test.
    let (writes, recorder) = record_child_writes(client.clone(), &ns);
    let parents: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    const PARENTS: usize = 40;
    for index in 0..PARENTS {
        let parent: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("parent-{index}"), "labels": {"stall-parent": ns}},
            "data": {"gen": "0"}
        }))
        .expect("a parent");
        parents
            .create(&PostParams::default(), &parent)
            .await
            .expect("create parent");
    }
    let updating = parents.clone();
    let updater = tokio::spawn(async move {
        for generation in 1u64.. {
            let name = format!("parent-{}", generation as usize % PARENTS);
            let patch = json!({"data": {"gen": generation.to_string()}});
            let _ = updating
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let of_stalled = |w: &ChildWrite| w.shard.is_some_and(|shard| stalled_shards.contains(&shard));
    eventually(
        Duration::from_secs(20),
        "the stalling replica writing children",
        || async {
            let count = writes
                .lock()
                .expect("writes")
                .iter()
                .filter(|w| w.writer == "a")
                .count();
            (count >= 20).then_some(())
        },
    )
    .await;
    let before_stall = writes.lock().expect("writes").clone();
    assert!(
        before_stall.iter().all(|w| (w.writer == "a") == of_stalled(w)),
        "before the stall, each replica writes the children of its own shards only"
    );

    proxy.stall();
    let stalled = Instant::now();
    let stopped = eventually(
        Duration::from_secs(20),
        "the stalled replica's workers stopped (its /readyz, not proxied)",
        || async {
            let (_, body) = old.readyz().await?;
            rule_line_standby(&body).then(|| stalled.elapsed())
        },
    )
    .await;
    // Only now are the held bytes dropped: until the workers stopped, the stalled connections stood for a network
    // that might still deliver them.
    proxy.cut();
    assert_eq!(old.units_held().await, Some(0), "the stalled replica runs no unit");

    let took_over = eventually(Duration::from_secs(30), "the other replica runs every unit", || async {
        (other.units_held().await == Some(34)).then(|| stalled.elapsed())
    })
    .await;
    let first_b = eventually(
        Duration::from_secs(20),
        "the other replica's first write of a child of the stalled replica's shards",
        || async {
            writes
                .lock()
                .expect("writes")
                .iter()
                .find(|w| w.writer == "b" && of_stalled(w))
                .cloned()
        },
    )
    .await;

    // The partition heals: the replica rejoins and is handed a share of the units again.
    let healed = Instant::now();
    proxy.heal();
    eventually(
        Duration::from_secs(40),
        "the healed replica sharing the units again",
        || async {
            let (a, b) = (old.units_held().await?, other.units_held().await?);
            (a + b == 34 && a >= 17 && b >= 17).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    updater.abort();
    recorder.abort();

    let writes = writes.lock().expect("writes").clone();
    let during_partition = |w: &&ChildWrite| w.seen > stalled && w.seen < healed;
    let by_old_after_stall: Vec<&ChildWrite> = writes
        .iter()
        .filter(|w| w.writer == "a")
        .filter(during_partition)
        .collect();
    let overlapping: Vec<&ChildWrite> = by_old_after_stall
        .iter()
        .copied()
        .filter(|w| w.version > first_b.version)
        .collect();
    let by_new = writes.iter().filter(|w| w.writer == "b" && of_stalled(w)).count();
    let by_old_after_heal = writes.iter().filter(|w| w.writer == "a" && w.seen > healed).count();
    println!(
        "stalled replica: workers stopped {:.2} s after the stall; the other ran every unit at {:.2} s, first write \
         on the stalled replica's shards at {:.2} s; stalled replica's writes seen during the partition: {}, landing \
         after the other's first write: {} (the other wrote {by_new} of those children); after healing the replica \
         wrote {by_old_after_heal} again",
        stopped.as_secs_f64(),
        took_over.as_secs_f64(),
        (first_b.seen - stalled).as_secs_f64(),
        by_old_after_stall.len(),
        overlapping.len(),
    );
    assert!(
        stopped <= Duration::from_millis(10_500),
        "the renew deadline is 10 s from the last renewal sent before the stall, stopped after {stopped:?}"
    );
    assert!(
        stopped < took_over,
        "workers stopped at {stopped:?}, the other replica took over at {took_over:?}"
    );
    let described: Vec<String> = overlapping
        .iter()
        .map(|w| format!("{} v{} ({:?} after the stall)", w.name, w.version, w.seen - stalled))
        .collect();
    assert!(
        described.is_empty(),
        "stalled replica's writes after the other's first: {described:?}"
    );
    assert!(
        by_new >= 1,
        "the other replica rewrote the stalled replica's children: {writes:?}"
    );
}
