//! `ruleplane diff`: what a rule set would do to a live cluster's parents — children created, changed (with a
//! diff), pruned, status changed — read from the cluster and decided by the worker's own render and plan, without
//! writing anything.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::discovery::{ApiCapabilities, Scope};
use kube::{Client, ResourceExt};
use ruleplane_config::object_diff::yaml;
use ruleplane_config::object_schema::KindSchemas;
use ruleplane_config::ownership::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, PARENT_UID_LABEL, RULE_LABEL};
use ruleplane_config::provenance::{ChildSigner, SIGNING_KEY_SECRET};
use ruleplane_config::{
    KindRef, ObjectKey, ParentPreview, PlanInput, Reconciler, RuleSet, Scopes, builtin_kind, gather_lookups_offline,
    preview_parent, render_lookup_target, selection_namespace,
};
use serde_json::Value;

use crate::cli::{DiffArgs, OutputFormat};
use crate::kube_client::KindDiscovery;

/// `kubectl diff`'s exit codes, which reviewers' scripts already know: 0 no change, 1 changes, 2 errors.
const CHANGES: u8 = 1;
const ERROR: u8 = 2;

pub fn main(args: DiffArgs) -> ExitCode {
    // Kinds neither the rule set, the built-ins nor the `--crds` manifests know are asked of the cluster, as the
    // manager does.
    let options =
        ruleplane_config::load_crd_paths(&args.installed.crds).map(|installed| ruleplane_config::LoadOptions {
            installed,
            unknown_kinds: ruleplane_config::UnknownKinds::AtRunTime,
            not_rules: args.installed.crds.clone(),
            // The diff renders what the manager would apply; no schema check or scheduling depends on the version.
            kubernetes_version: ruleplane_config::KubernetesVersion::NEWEST,
        });
    let loaded =
        options.and_then(|options| ruleplane_config::load_paths_with(std::slice::from_ref(&args.rules), &options));
    let rules = match loaded {
        Ok(rules) => rules,
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            return ExitCode::from(ERROR);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the async runtime: {error}");
            return ExitCode::from(ERROR);
        }
    };
    match runtime.block_on(diff(&rules, &args)) {
        Ok(report) => {
            match args.output {
                OutputFormat::Text => print!("{}", report.text),
                OutputFormat::Json => {
                    println!("{}", serde_json::to_string_pretty(&report.json).unwrap_or_default())
                }
            }
            if report.changes == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(CHANGES)
            }
        }
        Err(error) => {
            eprintln!("{error:#}");
            ExitCode::from(ERROR)
        }
    }
}

/// The report, as text and as JSON (the same facts), and how many parents it lists with changes.
pub struct DiffReport {
    pub text: String,
    pub changes: usize,
    pub json: Value,
}

pub async fn diff(rules: &RuleSet, args: &DiffArgs) -> anyhow::Result<DiffReport> {
    let client =
        crate::kube_client::connect(args.kubeconfig.as_deref(), crate::kube_client::ClientLimits::NONE).await?;
    let mut report = DiffReport {
        text: String::new(),
        changes: 0,
        json: serde_json::json!({ "parents": [], "notServed": [] }),
    };
    let mut totals = Totals::default();
    let discovery = KindDiscovery::new(client.clone());
    // The manager's key tells its children from look-alikes; without it, labels decide (and the report says so).
    let unchecked = |why: String| {
        format!("note: child signatures not checked ({why}): every object with a rule's labels counts as its child\n\n")
    };
    let (signer, note) = match crate::child_signing::read_key(&client, &args.manager_namespace).await {
        Ok(Some(key)) => (ChildSigner::Key(std::sync::Arc::new(key)), None),
        Ok(None) => (
            ChildSigner::Unsigned,
            Some(unchecked(format!(
                "no Secret {}/{SIGNING_KEY_SECRET}; see --manager-namespace",
                args.manager_namespace
            ))),
        ),
        Err(error) => (ChildSigner::Unsigned, Some(unchecked(error.to_string()))),
    };
    report.json["signaturesChecked"] = note.is_none().into();
    report.text.push_str(note.as_deref().unwrap_or_default());
    // The parents' kinds' defaults as the rule set declares them (a default it adds reaches the parents once its
    // CRD is applied).
    let schemas = KindSchemas::of_rule_set(rules);
    for rule in rules.reconcilers() {
        // Kinds only the cluster knows, filled in as the worker does (one not served stays unknown and is
        // reported as not served below).
        let rule = discovery
            .fill_installed_kinds(rule)
            .await
            .with_context(|| format!("discovering the kinds of rule {}", rule.name()))?;
        let inputs = DiffInputs {
            client: &client,
            discovery: &discovery,
            signer: &signer,
            schemas: &schemas,
            shards: args.shards,
        };
        diff_rule(&inputs, &rule, &mut report, &mut totals).await?;
    }
    let _ = writeln!(
        report.text,
        "{} parent(s): {} child(ren) to create, {} to change, {} to prune, {} to release, {} unchanged; {} status(es) to change",
        totals.parents, totals.create, totals.change, totals.prune, totals.release, totals.unchanged, totals.status
    );
    if totals.patch > 0 {
        // Only rules with `patches` print this line: the summary above stays as scripts read it.
        let _ = writeln!(
            report.text,
            "{} patch(es) of objects the rules do not own to apply",
            totals.patch
        );
    }
    report.json["changes"] = report.changes.into();
    report.json["totals"] = serde_json::json!({
        "parents": totals.parents, "create": totals.create, "change": totals.change, "prune": totals.prune,
        "release": totals.release, "unchanged": totals.unchanged, "status": totals.status, "patch": totals.patch,
    });
    Ok(report)
}

#[derive(Default)]
struct Totals {
    parents: usize,
    create: usize,
    change: usize,
    prune: usize,
    release: usize,
    unchanged: usize,
    status: usize,
    patch: usize,
}

/// What the apiserver serves for `apiVersion`/`kind`, or `None` when it does not serve it (yet).
async fn discover(
    discovery: &KindDiscovery,
    api_version: &str,
    kind: &str,
) -> anyhow::Result<Option<(ApiResource, ApiCapabilities)>> {
    match discovery.kind(api_version, kind).await {
        Ok(found) => Ok(Some(found)),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(anyhow!(error)).with_context(|| format!("discovering {api_version} {kind}")),
    }
}

fn api(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Objects as JSON with their apiVersion and kind (list items carry none).
fn typed_values(objects: Vec<DynamicObject>, resource: &ApiResource) -> Vec<Value> {
    objects
        .into_iter()
        .filter_map(|object| {
            let mut value = serde_json::to_value(object).ok()?;
            value["apiVersion"] = Value::from(resource.api_version.clone());
            value["kind"] = Value::from(resource.kind.clone());
            if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("managedFields");
            }
            Some(value)
        })
        .collect()
}

/// What every rule's diff reads besides the rule.
struct DiffInputs<'a> {
    client: &'a Client,
    discovery: &'a KindDiscovery,
    signer: &'a ChildSigner,
    schemas: &'a KindSchemas,
    shards: u32,
}

async fn diff_rule(
    inputs: &DiffInputs<'_>,
    rule: &Reconciler,
    report: &mut DiffReport,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    let DiffInputs {
        client,
        discovery,
        signer,
        schemas,
        shards,
    } = *inputs;
    let watched = &rule.spec.watched;
    let name = rule.name();
    let Some((parent_resource, parent_caps)) = discover(discovery, &watched.api_version, &watched.kind).await? else {
        let declared = rule.kinds().parent.as_ref().and_then(|kind| kind.declared_by());
        push(
            &mut report.json["notServed"],
            serde_json::json!({
                "rule": name, "apiVersion": watched.api_version, "kind": watched.kind, "declaredBy": declared,
            }),
        );
        let _ = writeln!(
            report.text,
            "Reconciler {name}: {} {} is not served yet{}: no parents\n",
            watched.api_version,
            watched.kind,
            declared
                .map(|by| format!(" (ResourceDefinition {by} of these rules declares it)"))
                .unwrap_or_default()
        );
        return Ok(());
    };
    let parents = api(client, &parent_resource, watched.namespace.as_deref())
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {} {}", watched.api_version, watched.kind))?;
    let selected = parents
        .items
        .into_iter()
        .filter(|parent| watched.selects(parent.namespace().as_deref(), &parent.name_any(), parent.labels()));
    let mut parents = typed_values(selected.collect(), &parent_resource);
    for parent in &mut parents {
        schemas.apply_defaults(parent);
    }
    // This rule's children of every kind it renders, by parent UID: one list request per kind.
    let mut scopes: HashMap<KindRef, bool> = HashMap::new();
    let mut children_by_parent: HashMap<String, Vec<Value>> = HashMap::new();
    let mut child_resources: HashMap<KindRef, ApiResource> = HashMap::new();
    for child in rule.children() {
        let kind = KindRef {
            api_version: child.api_version.clone(),
            kind: child.kind.clone(),
        };
        if scopes.contains_key(&kind) {
            continue;
        }
        let Some((resource, caps)) = discover(discovery, &child.api_version, &child.kind).await? else {
            // Nothing of a kind the apiserver does not serve can exist; applying it would fail, as the worker says.
            scopes.insert(kind, true);
            continue;
        };
        scopes.insert(kind.clone(), caps.scope == Scope::Namespaced);
        let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{RULE_LABEL}={name}");
        let listed = Api::<DynamicObject>::all_with(client.clone(), &resource)
            .list(&ListParams::default().labels(&selector))
            .await
            .with_context(|| format!("listing {} {} children", child.api_version, child.kind))?;
        for object in typed_values(listed.items, &resource) {
            if let Some(uid) = object
                .pointer("/metadata/labels")
                .and_then(|l| l.get(PARENT_UID_LABEL))
                .and_then(Value::as_str)
            {
                children_by_parent.entry(uid.to_string()).or_default().push(object);
            }
        }
        child_resources.insert(kind, resource);
    }
    let child_namespaced = |api_version: &str, kind: &str| {
        scopes
            .get(&KindRef {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
            .copied()
            .or_else(|| builtin_kind(api_version, kind).map(|k| k.namespaced))
            .unwrap_or(true)
    };
    let writes_status = rule.writes_status();
    let status_subresource = parent_caps.subresources.iter().any(|(sub, _)| sub.plural == "status");
    let scopes = Scopes {
        parent_namespaced: parent_caps.scope == Scope::Namespaced,
        child_namespaced: &child_namespaced,
        status: writes_status.then_some(status_subresource),
    };
    // Each lookup kind discovered once, each lookup target read once per run.
    let mut lookup_resources: HashMap<KindRef, Option<ApiResource>> = HashMap::new();
    for lookup in rule.lookups() {
        let kind = KindRef {
            api_version: lookup.spec.api_version.clone(),
            kind: lookup.spec.kind.clone(),
        };
        if let std::collections::hash_map::Entry::Vacant(entry) = lookup_resources.entry(kind) {
            let KindRef { api_version, kind } = entry.key();
            let found = discover(discovery, api_version, kind)
                .await?
                .map(|(resource, _)| resource);
            entry.insert(found);
        }
    }
    // Each patched kind discovered once, its objects listed once per namespace (`None`: cluster-scoped).
    let mut patch_resources: HashMap<KindRef, Option<ApiResource>> = HashMap::new();
    for patch in rule.patches() {
        let kind = KindRef {
            api_version: patch.api_version.clone(),
            kind: patch.kind.clone(),
        };
        if let std::collections::hash_map::Entry::Vacant(entry) = patch_resources.entry(kind) {
            let KindRef { api_version, kind } = entry.key();
            let found = discover(discovery, api_version, kind)
                .await?
                .map(|(resource, _)| resource);
            entry.insert(found);
        }
    }
    let mut patch_cache: HashMap<(KindRef, Option<String>), Vec<Value>> = HashMap::new();
    // A looked-up object by kind, namespace and name: read once however many parents read it.
    let mut lookup_cache: HashMap<(KindRef, Option<String>, String), Option<Value>> = HashMap::new();
    // A selector lookup's objects by kind, selector and namespace (`None`: all), listed once.
    let mut selected_cache: HashMap<(KindRef, String, Option<String>), Vec<Value>> = HashMap::new();
    for parent in &parents {
        totals.parents += 1;
        let uid = parent
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let parent_ref = object_ref(parent);
        let mut available = Vec::new();
        for lookup in rule.lookups() {
            if let Some(selection) = lookup.selection() {
                let Ok(namespace) = selection_namespace(rule, lookup, parent) else {
                    continue; // the render below reports the same error
                };
                let kind = KindRef {
                    api_version: lookup.spec.api_version.clone(),
                    kind: lookup.spec.kind.clone(),
                };
                let selector = selection.selector.to_query_string();
                let key = (kind.clone(), selector.clone(), namespace.clone());
                if !selected_cache.contains_key(&key) {
                    let found = match &lookup_resources[&kind] {
                        Some(resource) => typed_values(
                            api(client, resource, namespace.as_deref())
                                .list(&ListParams::default().labels(&selector))
                                .await
                                .with_context(|| format!("listing lookup {} of {parent_ref}", lookup.name))?
                                .items,
                            resource,
                        ),
                        None => Vec::new(),
                    };
                    selected_cache.insert(key.clone(), found);
                }
                available.extend(selected_cache[&key].iter().cloned());
                continue;
            }
            let Ok((object_name, namespace)) = render_lookup_target(lookup, parent) else {
                continue; // the render below reports the same error
            };
            let kind = KindRef {
                api_version: lookup.spec.api_version.clone(),
                kind: lookup.spec.kind.clone(),
            };
            let key = (kind.clone(), namespace.clone(), object_name.clone());
            if !lookup_cache.contains_key(&key) {
                let resource = &lookup_resources[&kind];
                let found = match resource {
                    Some(resource) => api(client, resource, namespace.as_deref())
                        .get_opt(&object_name)
                        .await
                        .with_context(|| format!("reading lookup {} of {parent_ref}", lookup.name))?
                        .and_then(|object| typed_values(vec![object], resource).pop()),
                    None => None,
                };
                lookup_cache.insert(key.clone(), found);
            }
            available.extend(lookup_cache[&key].clone());
        }
        // The objects the parent's patches may select: their kinds' objects where it may patch (its namespace;
        // a Namespace parent: that namespace), as the worker's caches hold them.
        let mut patch_targets = Vec::new();
        let patch_namespace = if scopes.parent_namespaced {
            parent.pointer("/metadata/namespace").and_then(Value::as_str)
        } else {
            parent.pointer("/metadata/name").and_then(Value::as_str)
        };
        for patch in rule.patches() {
            let kind = KindRef {
                api_version: patch.api_version.clone(),
                kind: patch.kind.clone(),
            };
            let Some(resource) = patch_resources.get(&kind).cloned().flatten() else {
                continue; // a kind not served has no objects to patch
            };
            let namespace = patch.namespaced.then(|| patch_namespace.map(str::to_owned)).flatten();
            if patch.namespaced && namespace.is_none() {
                continue; // the plan reports a namespaced patch under a cluster-scoped parent
            }
            let key = (kind, namespace);
            if !patch_cache.contains_key(&key) {
                let listed = api(client, &resource, key.1.as_deref())
                    .list(&ListParams::default())
                    .await
                    .with_context(|| {
                        format!(
                            "listing {} {} for patches of {parent_ref}",
                            patch.api_version, patch.kind
                        )
                    })?;
                patch_cache.insert(key.clone(), typed_values(listed.items, &resource));
            }
            patch_targets.extend(patch_cache[&key].iter().cloned());
        }
        let observed = children_by_parent.remove(uid).unwrap_or_default();
        let preview = gather_lookups_offline(rule, parent, &available).and_then(|lookups| {
            let input = PlanInput {
                rule,
                parent,
                lookups: &lookups,
                observed: &observed,
                patch_targets: &patch_targets,
                scopes: &scopes,
                signer,
                shards,
            };
            preview_parent(&input, &now())
        });
        match preview {
            Err(error) => {
                report.changes += 1;
                let _ = writeln!(
                    report.text,
                    "Reconciler {name} › {parent_ref}\n  ! render error: {error}\n"
                );
                push(
                    &mut report.json["parents"],
                    serde_json::json!({ "rule": name, "parent": parent_ref, "error": error.to_string() }),
                );
            }
            Ok(preview) => {
                let conflicts = conflicts(client, rule, uid, signer, &preview, &child_resources).await?;
                write_preview(&mut report.text, name, &parent_ref, &preview, &conflicts);
                push(
                    &mut report.json["parents"],
                    preview_json(name, &parent_ref, &preview, &conflicts),
                );
                totals.create += preview.create.len();
                totals.change += preview.change.len();
                totals.prune += preview.prune.len();
                totals.release += preview.release.len();
                totals.unchanged += preview.unchanged;
                totals.status += usize::from(preview.status.is_some());
                totals.patch += preview.patch.len();
                if !preview.is_empty() {
                    report.changes += 1;
                }
            }
        }
    }
    Ok(())
}

/// Children to create whose name is taken by an object this rule did not create for this parent: the worker
/// would refuse them (a conflict) unless the rule adopts.
async fn conflicts(
    client: &Client,
    rule: &Reconciler,
    uid: &str,
    signer: &ChildSigner,
    preview: &ParentPreview,
    resources: &HashMap<KindRef, ApiResource>,
) -> anyhow::Result<Vec<ObjectKey>> {
    let mut found = Vec::new();
    for child in preview.create.iter().filter(|child| !rule.adopts(child)) {
        let Some(key) = ObjectKey::of(child) else { continue };
        let kind = KindRef {
            api_version: key.api_version.clone(),
            kind: key.kind.clone(),
        };
        let Some(resource) = resources.get(&kind) else {
            continue;
        };
        let existing = api(client, resource, key.namespace.as_deref())
            .get_metadata_opt(&key.name)
            .await
            .with_context(|| format!("checking {key}"))?;
        if let Some(existing) = existing {
            let labels = existing.metadata.labels.clone().unwrap_or_default();
            let ours = ruleplane_config::ownership::is_child_of(&labels, rule.name(), uid)
                && crate::child_signing::proves_child(signer, &key.api_version, &key.kind, &existing.metadata);
            if !ours {
                found.push(key);
            }
        }
    }
    Ok(found)
}

fn object_ref(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let namespace = text("/metadata/namespace");
    let name = text("/metadata/name");
    let kind = text("/kind");
    if namespace.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {namespace}/{name}")
    }
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|line| format!("{by}{line}\n")).collect()
}

fn write_preview(out: &mut String, rule: &str, parent: &str, preview: &ParentPreview, conflicts: &[ObjectKey]) {
    if preview.is_empty() {
        let _ = writeln!(
            out,
            "Reconciler {rule} › {parent}: no changes ({} child(ren) unchanged)",
            preview.unchanged
        );
        return;
    }
    let _ = writeln!(out, "Reconciler {rule} › {parent}");
    for child in &preview.create {
        let key = ObjectKey::of(child).map(|k| k.to_string()).unwrap_or_default();
        let key_ref = ObjectKey::of(child);
        if key_ref.as_ref().is_some_and(|k| conflicts.contains(k)) {
            let _ = writeln!(
                out,
                "  ! conflict {key}: an object with this name exists and this rule did not create it (set `adopt: true` to take it over)"
            );
        }
        let _ = writeln!(out, "  + create {key}");
        out.push_str(&indent(&yaml(child), "      "));
    }
    for change in &preview.change {
        let _ = writeln!(out, "  ~ change {}", change.key);
        if change.diff.is_empty() {
            let _ = writeln!(out, "      (fields the template no longer sets would be removed)");
        } else {
            out.push_str(&indent(&change.diff, "      "));
        }
    }
    for key in &preview.prune {
        let _ = writeln!(out, "  - prune {key}");
    }
    for key in &preview.release {
        let _ = writeln!(out, "  = release {key} (retain: kept, no longer owned)");
    }
    if !preview.waiting.is_empty() {
        let _ = writeln!(
            out,
            "  … waiting: {} (they read a child that is not ready yet)",
            preview.waiting.join(", ")
        );
    }
    for patch in &preview.patch {
        let _ = writeln!(
            out,
            "  ~ patch {} {} (fields of an object this rule does not own)",
            patch.patch, patch.key
        );
        out.push_str(&indent(&patch.diff, "      "));
    }
    if let Some(status) = &preview.status {
        let _ = writeln!(out, "  ~ status");
        out.push_str(&indent(status, "      "));
    }
    out.push('\n');
}

fn push(list: &mut Value, item: Value) {
    if let Some(items) = list.as_array_mut() {
        items.push(item);
    }
}

/// One parent's entry in the JSON report: what the text shows, each child named as `kind namespace/name`.
fn preview_json(rule: &str, parent: &str, preview: &ParentPreview, conflicts: &[ObjectKey]) -> Value {
    let keys = |keys: &[ObjectKey]| keys.iter().map(ToString::to_string).collect::<Vec<_>>();
    serde_json::json!({
        "rule": rule,
        "parent": parent,
        "create": preview.create,
        "conflicts": keys(conflicts),
        "change": preview.change.iter().map(|c| serde_json::json!({ "child": c.key.to_string(), "diff": c.diff }))
            .collect::<Vec<_>>(),
        "prune": keys(&preview.prune),
        "release": keys(&preview.release),
        "waiting": preview.waiting,
        "unchanged": preview.unchanged,
        "status": preview.status,
        "patch": preview.patch.iter()
            .map(|p| serde_json::json!({ "patch": p.patch, "object": p.key.to_string(), "diff": p.diff }))
            .collect::<Vec<_>>(),
    })
}

fn now() -> String {
    crate::workers::now()
}
