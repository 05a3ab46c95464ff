//! The Reconciler worker without a cluster: caches fed synthetic objects, writes made to a recording, so a
//! reconcile and a deletion are checked write by write.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::EventType;
use kube::runtime::watcher::Event;
use ruleplane_config::ownership::{PARENT_UID_LABEL, RULE_LABEL, cleanup_finalizer};
use ruleplane_config::{ChildApply, KindRef, ObjectKey, PatchApply, Reconciler, Removal};
use serde_json::{Value, json};

use super::io::{AppliedChild, ChildChange};
use super::writer::ChildWriter;
use super::writes::OwnWrites;
use super::{ParentKey, ParentReconciler, ReconcilerError, Watched, cleanup, lookups};
use crate::runner::{Action, Requeue};
use crate::watch_hub::SharedWatch;

const RULES: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: shop }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: settings
      recreate: true
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-settings" }
        data: { size: "{{data.size}}" }
    - id: debug
      includeWhen: "{.data.debug}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-debug" }
    - id: audit
      retain: true
      includeWhen: "{.data.audit}"
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-audit" }
    - id: mirror
      namespace: audit
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-mirror" }
"#;

/// The writes a worker asked for, in order, and the objects its applies "stored".
#[derive(Default)]
struct Recording {
    writes: Mutex<Vec<String>>,
    stored: Mutex<Vec<Value>>,
    /// Another field manager holding `.data.size` of every child an update applies (a writer fighting the rule).
    intruder: Mutex<Option<String>>,
    /// Names whose updates the "apiserver" refuses as immutable (creates pass).
    immutable: Mutex<HashSet<String>>,
}

impl Recording {
    fn take(&self) -> Vec<String> {
        let mut writes = std::mem::take(&mut *self.writes.lock().unwrap());
        // Applies go out together: their order within a round is not the worker's promise.
        writes.sort();
        writes
    }

    fn note(&self, write: String) {
        self.writes.lock().unwrap().push(write);
    }
}

impl ChildWriter for Recording {
    async fn add_finalizer(&self, _: &ParentReconciler, _: &DynamicObject) -> Result<(), ReconcilerError> {
        self.note("add finalizer".into());
        Ok(())
    }

    async fn remove_finalizer(&self, _: &ParentReconciler, _: &DynamicObject) -> Result<(), ReconcilerError> {
        self.note("remove finalizer".into());
        Ok(())
    }

    async fn apply(
        &self,
        _: &ParentReconciler,
        _: &Watched,
        apply: &ChildApply,
        _: &DynamicObject,
    ) -> Result<AppliedChild, ReconcilerError> {
        let verb = if apply.created { "create" } else { "update" };
        self.note(format!("{verb} {}", apply.key));
        if !apply.created && self.immutable.lock().unwrap().contains(&apply.key.name) {
            return Err(ReconcilerError::Rejected {
                child: apply.key.clone(),
                message: "data: Forbidden: field is immutable when `immutable` is set".into(),
                immutable: true,
            });
        }
        let mut object = apply.object.clone();
        object["metadata"]["uid"] = json!(format!("uid-{}", apply.key.name));
        object["metadata"]["resourceVersion"] = json!("2");
        self.stored.lock().unwrap().push(object.clone());
        let change = if apply.created {
            ChildChange::Created
        } else {
            ChildChange::Updated
        };
        let conflicts = match (&*self.intruder.lock().unwrap(), apply.created) {
            (Some(manager), false) => {
                let cause = (
                    ".data.size".to_string(),
                    format!("conflict with \"{manager}\" using v1"),
                );
                ruleplane_config::conflicts_of(&apply.key, &[cause])
            }
            _ => Vec::new(),
        };
        Ok(AppliedChild {
            object,
            change,
            conflicts,
        })
    }

    async fn recreate(
        &self,
        _: &ParentReconciler,
        _: &Watched,
        apply: &ChildApply,
        _: &DynamicObject,
        uid: &str,
    ) -> Result<AppliedChild, ReconcilerError> {
        self.note(format!("delete {} if uid {uid}, then create it", apply.key));
        let mut object = apply.object.clone();
        object["metadata"]["uid"] = json!(format!("uid-{}-2", apply.key.name));
        object["metadata"]["resourceVersion"] = json!("3");
        self.stored.lock().unwrap().push(object.clone());
        Ok(AppliedChild {
            object,
            change: ChildChange::Recreated,
            conflicts: Vec::new(),
        })
    }

    async fn remove(
        &self,
        _: &ParentReconciler,
        _: &Watched,
        key: &ObjectKey,
        _: &DynamicObject,
        removal: Removal,
    ) -> Result<(), ReconcilerError> {
        let verb = match removal {
            Removal::Delete => "delete",
            Removal::Release => "release",
        };
        self.note(format!("{verb} {key}"));
        Ok(())
    }

    async fn patch(&self, _: &ParentReconciler, _: &Watched, apply: &PatchApply) -> Result<bool, ReconcilerError> {
        self.note(format!("patch {} as {}", apply.key, apply.manager));
        Ok(true)
    }

    async fn release_patches(
        &self,
        _: &ParentReconciler,
        _: &Watched,
        namespace: Option<&str>,
        managers: &[String],
    ) -> Result<(), ReconcilerError> {
        self.note(format!(
            "release {} in {}",
            managers.join(", "),
            namespace.unwrap_or_default()
        ));
        Ok(())
    }

    async fn announce(&self, _: &ParentReconciler, _: &DynamicObject, reason: &str, children: &[ObjectKey]) {
        if !children.is_empty() {
            self.note(format!("event {reason} ({})", children.len()));
        }
    }

    async fn publish(&self, _: &ParentReconciler, _: &DynamicObject, _: EventType, reason: &str, _: String) {
        self.note(format!("event {reason}"));
    }
}

fn config_maps() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
}

/// A worker for the rule above with empty caches, as `run` builds it minus the watches' feeds.
async fn worker() -> ParentReconciler {
    worker_for(RULES).await
}

/// A worker for the rule `shop` of `rules` (a variant of the rule above: its children ConfigMaps, any patches of
/// Pods).
async fn worker_for(rules: &str) -> ParentReconciler {
    let rules = ruleplane_config::load_str("rules.yaml", rules).expect("rules load");
    let Some(ruleplane_config::Rule::Reconciler(rule)) = rules.get("shop") else {
        panic!("no rule")
    };
    let rule: Reconciler = rule.clone();
    let ctx = crate::context::offline_context();
    let metrics = Default::default();
    let parent = Watched {
        watch: SharedWatch::new(config_maps(), &metrics),
        namespaced: true,
    };
    let children = BTreeMap::from([(
        KindRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        },
        Watched {
            watch: SharedWatch::indexed(config_maps(), &metrics, [RULE_LABEL, PARENT_UID_LABEL]),
            namespaced: true,
        },
    )]);
    let lookups = lookups::Lookups::start(&rule, &ctx.client, &ctx.discovery, &ctx.hub, Default::default())
        .await
        .expect("a rule without lookups needs no discovery");
    let (requeue, _) = Requeue::channel();
    let change_to_applied = ctx
        .metrics
        .change_to_applied
        .get_or_create(&crate::metrics::Metrics::labels(rule.name(), super::KIND))
        .clone();
    ParentReconciler {
        finalizer: cleanup_finalizer(rule.name()),
        rule,
        change_to_applied,
        ctx,
        parent,
        children,
        patched: BTreeMap::from([(
            KindRef {
                api_version: "v1".into(),
                kind: "Pod".into(),
            },
            Watched {
                watch: SharedWatch::new(ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()), &metrics),
                namespaced: true,
            },
        )]),
        fights: Mutex::new(HashMap::new()),
        lookups,
        writes_status: false,
        status_subresource: false,
        writes: OwnWrites::new(requeue),
        left_selection: Mutex::new(HashSet::new()),
    }
}

fn parent(data: Value, finalized: bool) -> (DynamicObject, Value) {
    let mut value = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1", "resourceVersion": "7"},
                           "data": data});
    if finalized {
        value["metadata"]["finalizers"] = json!([cleanup_finalizer("shop")]);
    }
    (serde_json::from_value(value.clone()).expect("object"), value)
}

/// The stored children arrive in the child watch, as their watch events would bring them.
fn echo(worker: &ParentReconciler, recording: &Recording) {
    let watch = &worker.child_watch("v1", "ConfigMap").expect("watched").watch;
    for object in recording.stored.lock().unwrap().drain(..) {
        watch.apply(Event::Apply(serde_json::from_value(object).expect("object")));
    }
}

fn key() -> ParentKey {
    ParentKey {
        namespace: Some("team-a".into()),
        name: "web".into(),
    }
}

/// One reconcile of the parent with `data` (carrying its finalizer or not): the writes it asked for, sorted.
async fn reconcile(worker: &ParentReconciler, recording: &Recording, data: Value, finalized: bool) -> Vec<String> {
    let (object, value) = parent(data, finalized);
    worker
        .converge(recording, &key(), &object, &value)
        .await
        .expect("converges");
    recording.take()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_writes_what_the_plan_says_and_nothing_once_converged() {
    let worker = worker().await;
    let recording = Recording::default();
    // A new parent: the finalizer first (the mirror child is in another namespace), then its children.
    let (object, value) = parent(json!({"size": "3"}), false);
    let converged = worker
        .converge(&recording, &key(), &object, &value)
        .await
        .expect("converges");
    assert_eq!(
        recording.take(),
        [
            "add finalizer",
            "create ConfigMap audit/web-mirror",
            "create ConfigMap team-a/web-settings",
            "event Created (2)",
        ]
    );
    assert_eq!(converged.excluded, ["debug", "audit"]);
    assert_eq!(converged.children["settings"]["metadata"]["uid"], "uid-web-settings");
    echo(&worker, &recording);
    // Converged: no request at all.
    assert_eq!(
        reconcile(&worker, &recording, json!({"size": "3"}), true).await,
        Vec::<String>::new()
    );
    // A change of the parent updates the child that renders it; an included child is created.
    let data = json!({"size": "4", "debug": "yes", "audit": "yes"});
    assert_eq!(
        reconcile(&worker, &recording, data, true).await,
        [
            "create ConfigMap team-a/web-audit",
            "create ConfigMap team-a/web-debug",
            "event Created (2)",
            "event Updated (1)",
            "update ConfigMap team-a/web-settings",
        ]
    );
    echo(&worker, &recording);
    // No longer included: the plain child is deleted, the retained one released.
    assert_eq!(
        reconcile(&worker, &recording, json!({"size": "4"}), true).await,
        [
            "delete ConfigMap team-a/web-debug",
            "release ConfigMap team-a/web-audit"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_removes_children_then_the_finalizer() {
    let worker = worker().await;
    let recording = Recording::default();
    reconcile(&worker, &recording, json!({"size": "3", "audit": "yes"}), true).await;
    echo(&worker, &recording);
    let (object, value) = parent(json!({"size": "3", "audit": "yes"}), true);
    let action = cleanup::finalize(&worker, &recording, &key(), &object, &value)
        .await
        .expect("finalizes");
    assert!(matches!(action, Action::AwaitChange));
    let writes = std::mem::take(&mut *recording.writes.lock().unwrap());
    assert_eq!(
        writes.last().map(String::as_str),
        Some("remove finalizer"),
        "{writes:?}"
    );
    let mut removals = writes[..writes.len() - 1].to_vec();
    removals.sort();
    assert_eq!(
        removals,
        [
            "delete ConfigMap audit/web-mirror",
            "delete ConfigMap team-a/web-settings",
            "release ConfigMap team-a/web-audit",
        ]
    );
}

const PATCHING_RULES: &str = r#"apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: shop }
spec:
  for: { apiVersion: v1, kind: ConfigMap }
  children:
    - id: settings
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-settings" }
  patches:
    - id: team
      selector: { matchLabels: { app: "{{metadata.name}}" } }
      template: |
        apiVersion: v1
        kind: Pod
        metadata:
          labels: { team: "{{data.team}}" }
"#;

/// A Pod of the parent's app arrives in the patched kind's watch.
fn pod_arrives(worker: &ParentReconciler, name: &str, labels: Value) {
    let watch = &worker.patched.values().next().expect("a patched kind").watch;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"), "labels": labels}});
    watch.apply(Event::Apply(serde_json::from_value(pod).expect("pod")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_set_fields_on_the_selected_pods_once_and_are_released_with_the_parent() {
    let worker = worker_for(PATCHING_RULES).await;
    let recording = Recording::default();
    pod_arrives(&worker, "web-0", json!({"app": "web"}));
    pod_arrives(&worker, "db-0", json!({"app": "db"}));
    assert_eq!(
        reconcile(&worker, &recording, json!({"team": "blue"}), false).await,
        [
            "add finalizer",
            "create ConfigMap team-a/web-settings",
            "event Created (1)",
            "event Patched (1)",
            "patch Pod team-a/web-0 as ruleplane-patch/shop/team/u-1",
        ]
    );
    echo(&worker, &recording);
    // The patched Pod as stored, and a new Pod of the app: only the new one is patched.
    pod_arrives(&worker, "web-0", json!({"app": "web", "team": "blue"}));
    pod_arrives(&worker, "web-1", json!({"app": "web"}));
    assert_eq!(
        reconcile(&worker, &recording, json!({"team": "blue"}), true).await,
        [
            "event Patched (1)",
            "patch Pod team-a/web-1 as ruleplane-patch/shop/team/u-1"
        ]
    );
    let (object, value) = parent(json!({"team": "blue"}), true);
    cleanup::finalize(&worker, &recording, &key(), &object, &value)
        .await
        .expect("finalizes");
    let writes = std::mem::take(&mut *recording.writes.lock().unwrap());
    assert_eq!(
        writes,
        [
            "delete ConfigMap team-a/web-settings",
            "release ruleplane-patch/shop/team/u-1 in team-a",
            "remove finalizer",
        ]
    );
}

/// The other writer's change of `web-settings` arrives in the child watch (not the rule's value any more).
fn changed_by_intruder(worker: &ParentReconciler) {
    let watched = worker.child_watch("v1", "ConfigMap").expect("watched");
    let key = ObjectKey {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("team-a".into()),
        name: "web-settings".into(),
    };
    // Not the echo of our write: the worker reads the cache again.
    worker.writes.forget(&worker.child_object(watched, &key));
    let watch = &watched.watch;
    let mut object = watch.get_value(Some("team-a"), "web-settings").expect("cached");
    object["data"]["size"] = json!("theirs");
    object["metadata"]["resourceVersion"] = json!("9");
    watch.apply(Event::Apply(serde_json::from_value(object).expect("object")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_fight_is_told_once_from_the_second_conflict_on() {
    let worker = worker().await;
    let recording = Recording::default();
    reconcile(&worker, &recording, json!({"size": "3"}), false).await;
    echo(&worker, &recording);
    *recording.intruder.lock().unwrap() = Some("intruder".into());
    let mut fights = Vec::new();
    for _ in 0..4 {
        changed_by_intruder(&worker);
        let writes = reconcile(&worker, &recording, json!({"size": "3"}), true).await;
        assert!(
            writes.contains(&"update ConfigMap team-a/web-settings".to_string()),
            "{writes:?}"
        );
        fights.push(writes.iter().filter(|w| *w == "event FieldFight").count());
        echo(&worker, &recording);
    }
    assert_eq!(
        fights,
        [0, 1, 0, 0],
        "a hand edit repaired once is no fight; then one Warning, not one per round"
    );
    let ongoing = worker
        .fights
        .lock()
        .unwrap()
        .get(&key())
        .and_then(ruleplane_config::Fights::message);
    assert!(ongoing.is_some_and(|m| m.contains(".data.size") && m.contains("intruder")));
    // The other writer stops: the next apply meets nobody, and the fight is over.
    *recording.intruder.lock().unwrap() = None;
    changed_by_intruder(&worker);
    reconcile(&worker, &recording, json!({"size": "3"}), true).await;
    assert!(!worker.fights.lock().unwrap().contains_key(&key()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_refused_as_immutable_recreates_a_recreate_child_under_the_uid_it_saw() {
    let worker = worker().await;
    let recording = Recording::default();
    reconcile(&worker, &recording, json!({"size": "3"}), true).await;
    echo(&worker, &recording);
    recording
        .immutable
        .lock()
        .unwrap()
        .extend(["web-settings".to_string(), "web-mirror".to_string()]);
    let (object, value) = parent(json!({"size": "4"}), true);
    let converged = worker
        .converge(&recording, &key(), &object, &value)
        .await
        .expect("the recreate child converges");
    assert_eq!(
        recording.take(),
        [
            "delete ConfigMap team-a/web-settings if uid uid-web-settings, then create it",
            "event Recreated (1)",
            "update ConfigMap team-a/web-settings",
        ]
    );
    assert_eq!(converged.children["settings"]["metadata"]["uid"], "uid-web-settings-2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_refused_as_immutable_is_reported_for_a_child_without_recreate() {
    let worker = worker_for(&RULES.replacen("      recreate: true\n", "", 1)).await;
    let recording = Recording::default();
    reconcile(&worker, &recording, json!({"size": "3"}), true).await;
    echo(&worker, &recording);
    recording.immutable.lock().unwrap().insert("web-settings".to_string());
    let (object, value) = parent(json!({"size": "4"}), true);
    let error = worker
        .converge(&recording, &key(), &object, &value)
        .await
        .err()
        .expect("the refusal is the reconcile's error");
    let message = error.to_string();
    assert!(message.contains("field is immutable"), "{message}");
    assert!(
        message.contains("set `recreate: true` on child `settings`"),
        "{message}"
    );
    // Nothing deleted: the object is left as it is.
    assert_eq!(recording.take(), ["update ConfigMap team-a/web-settings"]);
}

/// A parent deleted while the parents' watch was down: the relist does not list it, yet the resync names it
/// (this worker still keeps its fights), and its reconcile finds it gone and forgets them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_without_a_parent_reconciles_it_as_gone_and_forgets_its_state() {
    use crate::runner::Reconcile;
    use crate::watch_hub::Change;
    let worker = worker().await;
    let (web, _) = parent(json!({"size": "3"}), false);
    let mut other = web.clone();
    other.metadata.name = Some("other".into());
    let watch = &worker.parent.watch;
    watch.apply(Event::Apply(web));
    worker
        .fights
        .lock()
        .unwrap()
        .insert(key(), ruleplane_config::Fights::default());

    watch.apply(Event::Init);
    watch.apply(Event::InitApply(other));
    watch.apply(Event::InitDone);
    assert!(watch.get(Some("team-a"), "web").is_none(), "the cache forgot it");
    let mut keys = worker.keys_for(&watch.key, &Change::Resync);
    keys.sort();
    let other_key = ParentKey {
        namespace: Some("team-a".into()),
        name: "other".into(),
    };
    assert_eq!(
        keys,
        [other_key, key()],
        "the listed parent, and the one state is kept for"
    );

    let reconciled = worker.reconcile(&key()).await.expect("a gone parent reconciles");
    assert!(matches!(reconciled.action, Action::AwaitChange));
    assert!(worker.fights.lock().unwrap().is_empty(), "its fights are forgotten");
    assert_eq!(
        worker.keys_for(&watch.key, &Change::Resync),
        [ParentKey {
            namespace: Some("team-a".into()),
            name: "other".into(),
        }],
        "the next resync no longer names it"
    );
}
