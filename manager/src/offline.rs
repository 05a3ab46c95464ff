//! Offline commands (validate, render, crds, schema): pure functions of the rule files, no cluster needed.

use std::path::Path;
use std::process::ExitCode;

use ruleplane_config::{Lookup, Reconciler, RuleSet};
use serde_json::Value;

use crate::cli::{CrdsArgs, OutputFormat, RbacArgs, RenderArgs, ValidateArgs};

/// Exit code for invalid input (rules, objects); clap already uses 2 for usage errors.
const INVALID: u8 = 1;

pub fn validate(args: &ValidateArgs) -> ExitCode {
    let result = ruleplane_config::load_paths(&args.paths);
    match args.output {
        OutputFormat::Json => {
            let report = match &result {
                Ok(rules) => serde_json::json!({
                    "valid": true,
                    "rules": rules.rules().iter().map(|r| serde_json::json!({
                        "name": r.name(), "kind": format!("{:?}", r.kind()), "source": r.source().to_string(),
                    })).collect::<Vec<_>>(),
                    "errors": [],
                }),
                Err(d) => serde_json::json!({"valid": false, "rules": [], "errors": d}),
            };
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
        }
        OutputFormat::Text => match &result {
            Ok(rules) => println!("{} rule(s) valid", rules.rules().len()),
            Err(d) => eprintln!("{d}"),
        },
    }
    if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(INVALID)
    }
}

/// Reads one or more YAML/JSON documents (JSON is YAML) from `path`.
fn read_objects(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn load_one(path: &Path) -> Result<RuleSet, ExitCode> {
    ruleplane_config::load_paths(&[path.to_path_buf()]).map_err(|d| {
        eprintln!("{d}");
        ExitCode::from(INVALID)
    })
}

fn field<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(obj, |v, k| v.get(k)).and_then(Value::as_str)
}

/// Finds a lookup's object among the files given with `--lookup`, the same way the worker's cache does.
fn find_lookup(available: &[Value], lookup: &Lookup, name: &str, namespace: Option<&str>) -> Option<Value> {
    available
        .iter()
        .find(|o| {
            field(o, &["apiVersion"]) == Some(lookup.api_version.as_str())
                && field(o, &["kind"]) == Some(lookup.kind.as_str())
                && field(o, &["metadata", "name"]) == Some(name)
                && (namespace.is_none() || field(o, &["metadata", "namespace"]) == namespace)
        })
        .cloned()
}

pub fn render(args: &RenderArgs) -> ExitCode {
    let rules = match load_one(&args.rules) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let parent = match read_objects(&args.object).map(|mut d| (d.len(), d.pop())) {
        Ok((1, Some(obj))) => obj,
        Ok((n, _)) => {
            eprintln!("{}: expected exactly one object, found {n}", args.object.display());
            return ExitCode::from(INVALID);
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(INVALID);
        }
    };
    let mut available = Vec::new();
    for file in &args.lookups {
        match read_objects(file) {
            Ok(objs) => available.extend(objs),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(INVALID);
            }
        }
    }
    let matching: Vec<&Reconciler> = rules
        .reconcilers()
        .filter(|r| match &args.rule {
            Some(name) => r.name() == name,
            None => {
                field(&parent, &["apiVersion"]) == Some(r.spec.watched.api_version.as_str())
                    && field(&parent, &["kind"]) == Some(r.spec.watched.kind.as_str())
            }
        })
        .collect();
    if matching.is_empty() {
        eprintln!(
            "no Reconciler rule in {} {}",
            args.rules.display(),
            match &args.rule {
                Some(name) => format!("is named `{name}`"),
                None => format!(
                    "watches {} {}",
                    field(&parent, &["apiVersion"]).unwrap_or("?"),
                    field(&parent, &["kind"]).unwrap_or("?")
                ),
            }
        );
        return ExitCode::from(INVALID);
    }
    let mut docs = Vec::new();
    for rule in matching {
        let rendered = ruleplane_config::gather_lookups(rule, &parent, |lookup, name, ns| {
            find_lookup(&available, lookup, name, ns)
        })
        .and_then(|lookups| ruleplane_config::render_children(rule, &parent, &lookups));
        match rendered {
            Ok(rendered) => {
                docs.extend(rendered.children);
                if !rendered.status.is_empty() {
                    docs.push(serde_json::json!({ "status": rendered.status }));
                }
            }
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(INVALID);
            }
        }
    }
    print_yaml_documents(&docs)
}

pub fn crds(args: &CrdsArgs) -> ExitCode {
    let rules = match load_one(&args.rules) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let crds: Vec<Value> = rules
        .resource_definitions()
        .filter_map(|rd| serde_json::to_value(ruleplane_config::generate_crd(rd)).ok())
        .collect();
    print_yaml_documents(&crds)
}

pub fn rbac(args: &RbacArgs) -> ExitCode {
    match load_one(&args.rules) {
        Ok(rules) => print_yaml_documents(&ruleplane_config::rbac_manifests(
            &rules,
            &args.name,
            &args.leader_election_namespace,
        )),
        Err(code) => code,
    }
}

pub fn schema() -> ExitCode {
    match serde_json::to_string_pretty(&ruleplane_config::rule_language_schema()) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot serialise the schema: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_yaml_documents(docs: &[Value]) -> ExitCode {
    let mut out = String::new();
    for doc in docs {
        match serde_saphyr::to_string(doc) {
            Ok(text) => {
                out.push_str("---\n");
                out.push_str(&text);
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
            Err(e) => {
                eprintln!("cannot print YAML: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    print!("{out}");
    ExitCode::SUCCESS
}
