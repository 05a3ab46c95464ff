//! Patches of objects the rule does not own: which existing objects a parent's `patches` select, the partial body
//! each gets under the parent's own field manager, which applies are needed, and which field managers to release.

use serde_json::{Map, Value};

use crate::naming::is_dns_subdomain;
use crate::ownership::{PATCH_FIELD_MANAGER_PREFIX, patch_field_manager};
use crate::reconciler::plan::{ObjectKey, contains};
use crate::reconciler::render::{RenderError, template_context};
use crate::reconciler::resolved::{PatchTarget, Reconciler, ResolvedPatch};
use crate::redaction::truncate;
use crate::yaml_tree::parse_json_documents;

/// One server-side apply of a patch to one existing object.
#[derive(Clone, Debug, PartialEq)]
pub struct PatchApply {
    /// The `patches` entry's id.
    pub patch: String,
    /// The field manager: the entry's for this parent ([`patch_field_manager`]).
    pub manager: String,
    /// The patched object.
    pub key: ObjectKey,
    /// The apply body: the fields the template sets, with the object's apiVersion, kind, name, namespace and
    /// **uid**. The uid is what makes the apply fail rather than create the object when it is gone (409, "uid
    /// mismatch"), or land on another object of the same name made since (422, `metadata.uid` is immutable): a
    /// patch never creates anything.
    pub body: Value,
}

/// What a parent's patches decide.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PatchPlan {
    /// The applies whose fields differ from the object as observed.
    pub apply: Vec<PatchApply>,
    /// Selected objects that already carry every field as the template sets it.
    pub unchanged: usize,
    /// Patches not planned because a child they read (`children.<id>`) does not exist or is not ready yet.
    pub waiting: Vec<String>,
    /// Patches that cannot be rendered or placed for this parent: each is reported, and stops neither the other
    /// patches nor the children.
    pub failures: Vec<RenderError>,
}

/// Plans the parent's patches over `targets`, the objects of the patched kinds where the parent may patch (the
/// worker passes its caches' objects of those kinds in the parent's namespace; more is harmless: each patch
/// keeps only its kind, namespace and name or selector). Fields read from the parent, lookups or the `children`
/// that exist and are ready (by id, as [`crate::reconciler::Rendered::visible`]) fill in scalars; a patch that
/// reads a child not among them waits, as a child does.
pub fn plan_patches(
    rule: &Reconciler,
    parent: &Value,
    parent_namespaced: bool,
    lookups: &Map<String, Value>,
    children: &Map<String, Value>,
    targets: &[Value],
) -> PatchPlan {
    let mut plan = PatchPlan::default();
    let context = template_context(parent, lookups);
    let uid = text(parent, "/metadata/uid").unwrap_or_default();
    for patch in rule.patches() {
        let Some(read) = patch
            .depends_on
            .iter()
            .map(|id| Some((id.clone(), children.get(id)?.clone())))
            .collect::<Option<Map<String, Value>>>()
        else {
            plan.waiting.push(patch.id.clone());
            continue;
        };
        let mut context = context.clone();
        if let Value::Object(fields) = &mut context
            && !read.is_empty()
        {
            fields.insert("children".into(), Value::Object(read));
        }
        let manager = patch_field_manager(rule.name(), &patch.id, &uid);
        match plan_patch(
            patch,
            &context,
            &manager,
            parent,
            parent_namespaced,
            targets,
            rule.reads_secrets(),
        ) {
            Ok((apply, unchanged)) => {
                plan.apply.extend(apply);
                plan.unchanged += unchanged;
            }
            Err(failure) => plan.failures.push(failure),
        }
    }
    plan
}

/// One patch's applies over `targets` (and how many selected objects need none).
fn plan_patch(
    patch: &ResolvedPatch,
    context: &Value,
    manager: &str,
    parent: &Value,
    parent_namespaced: bool,
    targets: &[Value],
    secret: bool,
) -> Result<(Vec<PatchApply>, usize), RenderError> {
    let namespace = patch_namespace(patch, parent, parent_namespaced)?;
    let selected = select(patch, context, namespace.as_deref(), targets, secret)?;
    if selected.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let fields = render_fields(patch, context)?;
    let (mut apply, mut unchanged) = (Vec::new(), 0);
    for target in selected {
        let Some(body) = body_for(patch, &fields, target) else {
            continue;
        };
        if contains(&body, target) {
            unchanged += 1;
            continue;
        }
        let Some(key) = ObjectKey::of(&body) else { continue };
        apply.push(PatchApply {
            patch: patch.id.clone(),
            manager: manager.to_string(),
            key,
            body,
        });
    }
    Ok((apply, unchanged))
}

/// An object of a patched kind, as far as selection looks at it: where it stands and its labels.
pub struct PatchCandidate<'a> {
    /// `group/version` of the object's kind.
    pub api_version: &'a str,
    /// Its kind.
    pub kind: &'a str,
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// Its labels.
    pub labels: &'a std::collections::BTreeMap<String, String>,
}

/// Which objects one parent's patches may select, rendered once per parent: a cheap filter before the plan (which
/// changes of patched objects concern the parent, which objects the plan reads). Without the parent's lookups: a
/// name or selector value whose template reads `lookups` matches anything (the plan decides), as does one that fails
/// to render (the plan reports it).
pub struct PatchFilter<'r> {
    patches: Vec<(&'r ResolvedPatch, Option<String>, Reach)>,
}

/// What one patch's name or selector values rendered to, for [`PatchFilter`].
enum Reach {
    /// The rendered name, or `None`: any name.
    Name(Option<String>),
    /// The rendered `matchLabels` (a label rendered to `None` matches any value) and the literal expressions.
    Labels(Vec<(String, Option<String>)>, crate::common::LabelSelector),
}

impl<'r> PatchFilter<'r> {
    /// The filter of `rule`'s patches for `parent` (patches that cannot be placed for it select nothing).
    pub fn new(rule: &'r Reconciler, parent: &Value, parent_namespaced: bool) -> PatchFilter<'r> {
        let context = template_context(parent, &Map::new());
        let render = |template: &crate::template::CompiledTemplate| {
            (!template.source().contains("lookups"))
                .then(|| template.render(&context).ok().map(|text| text.trim().to_string()))
                .flatten()
        };
        let patches = rule
            .patches()
            .iter()
            .filter_map(|patch| {
                let namespace = patch_namespace(patch, parent, parent_namespaced).ok()?;
                let reach = match &patch.target {
                    PatchTarget::Name(template) => Reach::Name(render(template)),
                    PatchTarget::Selector { match_labels, selector } => Reach::Labels(
                        match_labels
                            .iter()
                            .map(|(label, template)| (label.clone(), render(template)))
                            .collect(),
                        crate::common::LabelSelector {
                            match_labels: Default::default(),
                            match_expressions: selector.match_expressions.clone(),
                        },
                    ),
                };
                Some((patch, namespace, reach))
            })
            .collect();
        PatchFilter { patches }
    }

    /// Whether one of the patches may select `candidate`.
    pub fn may_patch(&self, candidate: &PatchCandidate) -> bool {
        self.patches.iter().any(|(patch, namespace, reach)| {
            patch.api_version == candidate.api_version
                && patch.kind == candidate.kind
                && namespace.as_deref() == candidate.namespace
                && match reach {
                    Reach::Name(name) => name.as_deref().is_none_or(|name| name == candidate.name),
                    Reach::Labels(match_labels, expressions) => {
                        expressions.matches(candidate.labels)
                            && match_labels.iter().all(|(label, value)| match value {
                                Some(value) => candidate.labels.get(label) == Some(value),
                                None => candidate.labels.contains_key(label),
                            })
                    }
                }
        })
    }
}

/// Where a patch looks for its objects: a namespaced kind in the parent's namespace (a Namespace parent: that
/// namespace), never one chosen by data; a cluster-scoped kind has none.
fn patch_namespace(
    patch: &ResolvedPatch,
    parent: &Value,
    parent_namespaced: bool,
) -> Result<Option<String>, RenderError> {
    if !patch.namespaced {
        return Ok(None);
    }
    if parent_namespaced {
        return Ok(text(parent, "/metadata/namespace"));
    }
    if text(parent, "/apiVersion").as_deref() == Some("v1") && text(parent, "/kind").as_deref() == Some("Namespace") {
        return Ok(text(parent, "/metadata/name"));
    }
    Err(patch_error(
        patch,
        format!(
            "{} is namespaced and the parent is cluster-scoped: a patch writes only in its parent's namespace",
            patch.kind
        ),
    ))
}

/// The objects among `targets` a patch selects.
fn select<'a>(
    patch: &ResolvedPatch,
    context: &Value,
    namespace: Option<&str>,
    targets: &'a [Value],
    secret: bool,
) -> Result<Vec<&'a Value>, RenderError> {
    let render = |template: &crate::template::CompiledTemplate, what: &str| {
        template
            .render(context)
            .map(|text| text.trim().to_string())
            .map_err(|error| template_error(patch, template, &format!("{what}: "), &error))
    };
    let same_place = |object: &&Value| {
        text(object, "/apiVersion").as_deref() == Some(patch.api_version.as_str())
            && text(object, "/kind").as_deref() == Some(patch.kind.as_str())
            && text(object, "/metadata/namespace").as_deref() == namespace
    };
    let selected = match &patch.target {
        PatchTarget::Name(template) => {
            let name = render(template, "name")?;
            if !is_dns_subdomain(&name) {
                let shown = if secret {
                    "(hidden)".to_string()
                } else {
                    truncate(&name, 64)
                };
                return Err(patch_error(
                    patch,
                    format!("rendered name `{shown}` is not a valid Kubernetes name"),
                ));
            }
            targets
                .iter()
                .filter(same_place)
                .filter(|object| text(object, "/metadata/name").as_deref() == Some(name.as_str()))
                .collect()
        }
        PatchTarget::Selector { match_labels, selector } => {
            let mut selector = selector.clone();
            for (label, template) in match_labels {
                selector.match_labels.insert(label.clone(), render(template, label)?);
            }
            targets
                .iter()
                .filter(same_place)
                .filter(|object| {
                    let labels = object
                        .pointer("/metadata/labels")
                        .and_then(|labels| serde_json::from_value(labels.clone()).ok())
                        .unwrap_or_default();
                    selector.matches(&labels)
                })
                .collect()
        }
    };
    Ok(selected)
}

/// The template rendered to the partial object it sets (values read from the cluster fill in scalars only).
fn render_fields(patch: &ResolvedPatch, context: &Value) -> Result<Value, RenderError> {
    let structured = patch
        .template
        .render_structured(context)
        .map_err(|error| template_error(patch, &patch.template, "", &error))?;
    let documents = parse_json_documents(structured.text())
        .map_err(|error| patch_error(patch, format!("rendered output is not valid YAML: {}", error.message)))?;
    let mut object = match <[Value; 1]>::try_from(documents) {
        Ok([one]) if one.is_object() => one,
        _ => {
            return Err(patch_error(
                patch,
                "the template must render one (partial) object".into(),
            ));
        }
    };
    structured
        .fill(&mut object)
        .map_err(|error| patch_error(patch, error.to_string()))?;
    Ok(object)
}

/// The apply body for one selected object: the rendered fields, with the identity of that object (kind, name,
/// namespace, uid) written over whatever the template said, so no value can point the apply elsewhere.
fn body_for(patch: &ResolvedPatch, fields: &Value, target: &Value) -> Option<Value> {
    let mut body = fields.clone();
    let object = body.as_object_mut()?;
    object.insert("apiVersion".into(), patch.api_version.clone().into());
    object.insert("kind".into(), patch.kind.clone().into());
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()?;
    metadata.insert("name".into(), target.pointer("/metadata/name")?.clone());
    // Every object read from the cluster has one; an object a `ruleplane test` case gives may not.
    match target.pointer("/metadata/uid") {
        Some(uid) => metadata.insert("uid".into(), uid.clone()),
        None => metadata.remove("uid"),
    };
    match target.pointer("/metadata/namespace") {
        Some(namespace) => metadata.insert("namespace".into(), namespace.clone()),
        None => metadata.remove("namespace"),
    };
    Some(body)
}

/// One field manager's hold on an object: what releasing it applies (an empty configuration under the manager:
/// the apiserver drops the fields only it owned and leaves values others own).
#[derive(Clone, Debug, PartialEq)]
pub struct PatchRelease {
    /// The patched object.
    pub key: ObjectKey,
    /// The manager to release.
    pub manager: String,
    /// The empty configuration: identity and uid only (a release never creates the object either).
    pub body: Value,
}

/// The patch field managers on `objects` (with their `managedFields`) that `releases` picks, e.g. a parent's
/// own (on its deletion), a rule's (on its removal) or one entry's (the entry removed from the rule).
pub fn patch_releases(objects: &[Value], releases: impl Fn(&str) -> bool) -> Vec<PatchRelease> {
    let mut out = Vec::new();
    for object in objects {
        let Some(key) = ObjectKey::of(object) else { continue };
        let Some(uid) = object.pointer("/metadata/uid") else {
            continue;
        };
        let managers = object
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|entry| entry["operation"].as_str() == Some("Apply"))
            .filter_map(|entry| entry["manager"].as_str())
            .filter(|manager| manager.starts_with(PATCH_FIELD_MANAGER_PREFIX) && releases(manager));
        for manager in managers {
            let mut metadata = Map::new();
            metadata.insert("name".into(), key.name.clone().into());
            if let Some(namespace) = &key.namespace {
                metadata.insert("namespace".into(), namespace.clone().into());
            }
            metadata.insert("uid".into(), uid.clone());
            let body = serde_json::json!({
                "apiVersion": key.api_version,
                "kind": key.kind,
                "metadata": metadata,
            });
            out.push(PatchRelease {
                key: key.clone(),
                manager: manager.to_string(),
                body,
            });
        }
    }
    out
}

/// The ids of `old`'s patches that `new` no longer has with the same kind: their fields are released when the
/// rule changes.
pub fn dropped_patches<'a>(old: &'a Reconciler, new: &Reconciler) -> Vec<&'a ResolvedPatch> {
    old.patches()
        .iter()
        .filter(|patch| {
            !new.patches()
                .iter()
                .any(|kept| kept.id == patch.id && kept.api_version == patch.api_version && kept.kind == patch.kind)
        })
        .collect()
}

fn text(object: &Value, pointer: &str) -> Option<String> {
    object.pointer(pointer).and_then(Value::as_str).map(str::to_string)
}

fn patch_error(patch: &ResolvedPatch, message: String) -> RenderError {
    RenderError::Patch {
        patch: patch.id.clone(),
        location: patch.source.clone(),
        message,
    }
}

/// A failing template of a patch, located in the partial it failed in when it did (else at the patch).
fn template_error(
    patch: &ResolvedPatch,
    template: &crate::template::CompiledTemplate,
    what: &str,
    error: &crate::template::TemplateRenderError,
) -> RenderError {
    RenderError::Patch {
        patch: patch.id.clone(),
        location: template.partial_location(error).unwrap_or_else(|| patch.source.clone()),
        message: format!("{what}{error}"),
    }
}

#[cfg(test)]
mod tests;
