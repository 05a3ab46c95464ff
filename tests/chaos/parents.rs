//! The Reconciler half of the soak: `Soak` parents (a ResourceDefinition rule declares the kind), each with a plain
//! child and a `forEach` collection of children, one per item of `spec.items`; a seeded stream of parent changes
//! (create, change `spec.gen`, add / change / remove items, delete) and what the children must be in the end.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use crate::faults::Rng;

/// The rules every replica runs: the `Soak` kind, its Reconciler, and the soak's SchedulerPolicy.
pub fn rules(scheduler: &str) -> String {
    format!(
        r#"apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: {{ name: soak.chaos.example.org }}
spec:
  scope: Namespaced
  versions:
    - name: v1
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [gen, items]
              properties:
                gen: {{ type: integer }}
                items:
                  type: array
                  maxItems: 20
                  items:
                    type: object
                    required: [name, value]
                    properties:
                      name: {{ type: string }}
                      value: {{ type: string }}
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
      subresources:
        status: {{}}
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: {{ name: soak }}
spec:
  for: {{ apiVersion: chaos.example.org/v1, kind: Soak }}
  children:
    - id: plain
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-plain" }}
        data: {{ gen: "{{{{spec.gen}}}}" }}
    - id: items
      forEach:
        - item: "{{.spec.items}}"
      maxItems: 20
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: {{ name: "{{{{metadata.name}}}}-{{{{item.name}}}}" }}
        data: {{ value: "{{{{item.value}}}}" }}
---
apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: {{ name: {scheduler} }}
spec: {{ schedulerName: {scheduler} }}
"#
    )
}

fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("chaos.example.org", "v1", "Soak"), "soaks")
}

pub fn parents(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &resource())
}

/// A parent as this side last asked for it.
#[derive(Debug, Clone)]
struct Asked {
    generation: u64,
    items: Vec<(String, String)>,
    next_item: u32,
}

impl Asked {
    fn spec(&self) -> Value {
        let items: Vec<Value> = self
            .items
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        json!({"gen": self.generation, "items": items})
    }
}

/// The stream's state: the parents as last asked, and what it ever asked to delete.
#[derive(Default)]
pub struct Stream {
    asked: BTreeMap<String, Asked>,
    next_parent: usize,
    /// Parents whose deletion was asked (whether or not the answer came back).
    pub deleted: BTreeSet<String>,
    /// (parent, item) pairs whose removal was asked.
    pub removed: BTreeSet<(String, String)>,
    /// Changes asked, and of them answered with success, by kind of change.
    pub asked_changes: BTreeMap<&'static str, (u64, u64)>,
}

fn parent_name(index: usize) -> String {
    format!("s-{index:04}")
}

impl Stream {
    fn new_parent(&mut self, items: usize) -> (String, Asked) {
        let name = parent_name(self.next_parent);
        self.next_parent += 1;
        let asked = Asked {
            generation: 0,
            items: (0..items).map(|i| (format!("i{i}"), format!("v0-{i}"))).collect(),
            next_item: u32::try_from(items).unwrap_or(0),
        };
        (name, asked)
    }

    /// Parents whose changes went through, for the summary.
    pub fn changes_succeeded(&self) -> u64 {
        self.asked_changes.values().map(|(_, ok)| ok).sum()
    }
}

fn object(name: &str, asked: &Asked) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "chaos.example.org/v1", "kind": "Soak",
        "metadata": {"name": name}, "spec": asked.spec(),
    }))
    .expect("a parent")
}

/// Creates `count` parents with 0–3 items each, 16 at a time.
pub async fn create_initial(api: &Api<DynamicObject>, stream: &Arc<Mutex<Stream>>, count: usize) {
    let batch: Vec<(String, Asked)> = {
        let mut stream = stream.lock().expect("stream");
        (0..count)
            .map(|i| {
                let (name, asked) = stream.new_parent(i % 4);
                stream.asked.insert(name.clone(), asked.clone());
                (name, asked)
            })
            .collect()
    };
    futures::stream::iter(batch)
        .map(|(name, asked)| async move {
            api.create(&PostParams::default(), &object(&name, &asked))
                .await
                .unwrap_or_else(|e| panic!("create parent {name}: {e}"));
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// Changes parents one at a time until `stop`, each change a random one of create, `spec.gen`, add / change /
/// remove an item, delete. Each request is given 5 s: the apiserver may be gone.
pub async fn run_stream(
    api: Api<DynamicObject>,
    stream: Arc<Mutex<Stream>>,
    seed: u64,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut rng = Rng::new(seed);
    while !*stop.borrow() {
        let roll = rng.below(100);
        // Decide under the lock, write without it.
        let (kind, name, request) = {
            let mut stream = stream.lock().expect("stream");
            let live: Vec<String> = stream.asked.keys().cloned().collect();
            if roll < 8 || live.is_empty() {
                let items = rng.below(4);
                let (name, asked) = stream.new_parent(items);
                stream.asked.insert(name.clone(), asked.clone());
                ("create", name.clone(), Request::Create(Box::new(object(&name, &asked))))
            } else {
                let name = live[rng.below(live.len())].clone();
                let mut asked = stream.asked.get(&name).cloned().expect("a live parent");
                let kind = match roll {
                    8..=57 => {
                        asked.generation += 1;
                        "gen"
                    }
                    58..=72 if asked.items.len() < 20 => {
                        let item = format!("i{}", asked.next_item);
                        asked.next_item += 1;
                        asked.items.push((item, format!("v{}", asked.generation)));
                        "add item"
                    }
                    73..=82 if !asked.items.is_empty() => {
                        let i = rng.below(asked.items.len());
                        asked.items[i].1 = format!("v{}-{}", asked.generation, rng.below(1000));
                        "change item"
                    }
                    83..=94 if !asked.items.is_empty() => {
                        let i = rng.below(asked.items.len());
                        let (item, _) = asked.items.remove(i);
                        stream.removed.insert((name.clone(), item));
                        "remove item"
                    }
                    95.. => "delete",
                    _ => {
                        asked.generation += 1;
                        "gen"
                    }
                };
                if kind == "delete" {
                    stream.asked.remove(&name);
                    stream.deleted.insert(name.clone());
                    (kind, name, Request::Delete)
                } else {
                    let spec = asked.spec();
                    stream.asked.insert(name.clone(), asked);
                    (kind, name, Request::Patch(json!({"spec": spec})))
                }
            }
        };
        let answer = tokio::time::timeout(Duration::from_secs(5), async {
            match &request {
                Request::Create(parent) => api.create(&PostParams::default(), parent).await.map(|_| ()),
                Request::Patch(patch) => api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ()),
                Request::Delete => api.delete(&name, &DeleteParams::default()).await.map(|_| ()),
            }
        })
        .await;
        let ok = matches!(answer, Ok(Ok(())));
        {
            let mut stream = stream.lock().expect("stream");
            let counts = stream.asked_changes.entry(kind).or_default();
            counts.0 += 1;
            counts.1 += u64::from(ok);
        }
        tokio::time::sleep(Duration::from_millis(if ok { 60 } else { 500 })).await;
    }
}

enum Request {
    Create(Box<DynamicObject>),
    Patch(Value),
    Delete,
}

/// A child as listed: its parent, which child it is (`plain` or the item's name), its data and UID.
#[derive(Debug, Clone)]
pub struct Child {
    pub uid: String,
    pub data: BTreeMap<String, String>,
    /// The `Soak` its owner reference names, if any: the garbage collector deletes it once that parent is gone.
    pub owner: Option<String>,
}

/// Every managed child in the namespace, by name.
pub async fn children(client: &Client, namespace: &str) -> Result<BTreeMap<String, Child>, String> {
    let list = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=ruleplane"))
        .await
        .map_err(|e| format!("list children: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|c| {
            Some((
                c.metadata.name?,
                Child {
                    owner: c
                        .metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .find(|o| o.kind == "Soak")
                        .map(|o| o.name.clone()),
                    uid: c.metadata.uid?,
                    data: c.data.unwrap_or_default(),
                },
            ))
        })
        .collect())
}

/// The children each parent's last spec asks for (name → data), read from the apiserver: what the stream asked is
/// not the truth when an answer was lost.
pub async fn expected_children(api: &Api<DynamicObject>) -> Result<BTreeMap<String, BTreeMap<String, String>>, String> {
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list parents: {e}"))?;
    let mut expected = BTreeMap::new();
    for parent in list.items {
        let (Some(name), None) = (
            parent.metadata.name.clone(),
            parent.metadata.deletion_timestamp.as_ref(),
        ) else {
            continue;
        };
        let spec = &parent.data["spec"];
        let generation = spec["gen"].as_u64().map(|g| g.to_string()).unwrap_or_default();
        expected.insert(
            format!("{name}-plain"),
            BTreeMap::from([("gen".to_owned(), generation)]),
        );
        for item in spec["items"].as_array().into_iter().flatten() {
            let (Some(item), Some(value)) = (item["name"].as_str(), item["value"].as_str()) else {
                continue;
            };
            expected.insert(
                format!("{name}-{item}"),
                BTreeMap::from([("value".to_owned(), value.to_owned())]),
            );
        }
    }
    Ok(expected)
}

/// `Ok` once the children are exactly what the parents ask for (none missing, none stale, none left of a removed
/// item; a deleted parent's only with their owner reference, for the garbage collector), with the number of
/// children and of those awaiting the garbage collector; else what differs.
pub async fn converged(client: &Client, api: &Api<DynamicObject>, namespace: &str) -> Result<(usize, usize), String> {
    let expected = expected_children(api).await?;
    let actual = children(client, namespace).await?;
    let missing: Vec<&String> = expected.keys().filter(|name| !actual.contains_key(*name)).collect();
    let stale: Vec<&String> = expected
        .iter()
        .filter(|(name, data)| actual.get(*name).is_some_and(|child| child.data != **data))
        .map(|(name, _)| name)
        .collect();
    // Children of a deleted parent go through kube-controller-manager's garbage collector (docs/reconcilers.md,
    // "Deletion and data safety"), which takes its time after an apiserver restart: Ruleplane's part is the owner
    // reference; one whose owner is gone counts as collected. Any other child not asked for is left over.
    let parents: BTreeSet<String> = expected
        .keys()
        .filter_map(|name| name.strip_suffix("-plain").map(str::to_owned))
        .collect();
    let mut awaiting_collection = 0;
    let mut extra: Vec<&String> = Vec::new();
    for (name, child) in actual.iter().filter(|(name, _)| !expected.contains_key(*name)) {
        if child.owner.as_ref().is_some_and(|owner| !parents.contains(owner)) {
            awaiting_collection += 1;
        } else {
            extra.push(name);
        }
    }
    if missing.is_empty() && stale.is_empty() && extra.is_empty() {
        return Ok((expected.len(), awaiting_collection));
    }
    Err(format!(
        "{} children expected: {} missing (e.g. {:?}), {} stale (e.g. {:?}), {} not asked for and without a \
         deleted owner (e.g. {:?})",
        expected.len(),
        missing.len(),
        missing.iter().take(5).collect::<Vec<_>>(),
        stale.len(),
        stale.iter().take(5).collect::<Vec<_>>(),
        extra.len(),
        extra.iter().take(5).collect::<Vec<_>>()
    ))
}

/// The children of the first parents that no change asked to remove, recreated (another UID) or gone since `first`.
pub fn recreated(first: &BTreeMap<String, Child>, now: &BTreeMap<String, Child>, stream: &Stream) -> Vec<String> {
    first
        .iter()
        .filter(|(name, _)| {
            let Some((parent, which)) = split_child(name) else {
                return false;
            };
            !stream.deleted.contains(parent)
                && (which == "plain" || !stream.removed.contains(&(parent.to_owned(), which.to_owned())))
        })
        .filter(|(name, child)| now.get(*name).is_none_or(|c| c.uid != child.uid))
        .map(|(name, child)| match now.get(name) {
            Some(c) => format!("{name} (uid {} → {})", child.uid, c.uid),
            None => format!("{name} (gone)"),
        })
        .collect()
}

/// `s-0001-i3` → (`s-0001`, `i3`).
fn split_child(name: &str) -> Option<(&str, &str)> {
    let (parent, which) = name.rsplit_once('-')?;
    Some((parent, which))
}
