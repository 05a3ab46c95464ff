//! `kind: TemplatePartials` documents: the template partials a rule file declares once, for every template of
//! that file to include as `{{> name}}`.

use std::collections::BTreeMap;

use super::fields::{embedded_pos, is_identifier, key, path, report_template_problems, with};
use super::schema_check::SchemaChecker;
use crate::diagnostics::{DiagnosticCode, FileDiagnostics};
use crate::schema::{cached_schema, template_partials_schema_ref};
use crate::template::{Partials, TEMPLATE_PARTIALS_KIND, TemplatePartialsDocument, TextOrigin, compile_partials};
use crate::yaml_tree::Node;

/// Whether `doc` is a partials document.
pub(crate) fn is_partials_document(doc: &Node) -> bool {
    doc.get("kind").and_then(Node::as_str) == Some(TEMPLATE_PARTIALS_KIND)
}

/// The partials of a file's documents: at most one `TemplatePartials` document per file, its partials checked
/// and compiled (problems reported in `out`, positioned in the file).
pub(crate) fn load_partials(documents: &[Node], lines: &[&str], out: &mut FileDiagnostics) -> Partials {
    let mut found = documents.iter().filter(|doc| is_partials_document(doc));
    let Some(doc) = found.next() else {
        return Partials::default();
    };
    for again in found {
        out.error(
            again.value_pos_of(&path(&["kind"])),
            DiagnosticCode::Duplicate,
            "a rule file has at most one `kind: TemplatePartials` document; put every partial of the file in the first",
        );
    }
    let schema = template_partials_schema_ref();
    let mut checker = SchemaChecker::new(cached_schema());
    checker.check(&schema, doc, &mut Vec::new(), doc.pos);
    if !checker.issues.is_empty() {
        for issue in checker.issues {
            out.error(issue.pos, issue.code, issue.message);
        }
        return Partials::default();
    }
    let document: TemplatePartialsDocument = match serde_json::from_value(doc.to_json()) {
        Ok(document) => document,
        Err(error) => {
            out.error(doc.pos, DiagnosticCode::Structure, format!("invalid partials: {error}"));
            return Partials::default();
        }
    };
    let partials_path = path(&["spec", "partials"]);
    for name in document.spec.partials.keys().filter(|name| !is_identifier(name)) {
        out.error(
            doc.pos_of(&with(&partials_path, &[key(name)])),
            DiagnosticCode::Name,
            format!(
                "partial name `{name}` must be letters, digits and `_` (templates include it as `{{{{> {name}}}}}`)"
            ),
        );
    }
    let (partials, problems) = compile_partials(&document.spec.partials);
    let mut by_name: BTreeMap<&str, Vec<crate::template::TemplateProblem>> = BTreeMap::new();
    for problem in problems {
        if let Some((name, _)) = document.spec.partials.get_key_value(&problem.name) {
            by_name.entry(name).or_default().push(problem.problem);
        }
    }
    for (name, problems) in by_name {
        let text = &document.spec.partials[name];
        report_template_problems(text, problems, doc, &with(&partials_path, &[key(name)]), lines, out);
    }
    // A render failing inside a partial points at the partial's own text, not at the template including it.
    partials.located(|name| {
        let value_pos = doc.value_pos_of(&with(&partials_path, &[key(name)]));
        Some(TextOrigin {
            start: out.location(embedded_pos(lines, value_pos, 1, 1)),
            later_column: embedded_pos(lines, value_pos, 2, 1).column,
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Rule;

    /// A partials document (`partials`: its `spec.partials` lines, indented by four) and a Reconciler whose
    /// children `config` and `copy` include them.
    fn file(partials: &str, config_template: &str) -> String {
        format!(
            "apiVersion: ruleplane.dev/v1alpha1\nkind: TemplatePartials\nmetadata: {{ name: shared }}\nspec:\n  \
             partials:\n{partials}---\n{}",
            crate::test_rules::config_map_reconciler(
                "shop",
                &format!(
                    "    - id: config\n      template: |\n{config_template}    - id: copy\n      template: |\n        \
                     apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: \"{{{{metadata.name}}}}-copy\"\n          \
                     labels:\n            {{{{> labels}}}}\n        data:\n          {{{{> reads_config}}}}\n"
                )
            )
        )
    }

    const PARTIALS: &str = "    labels: |\n      app: {{metadata.name}}\n      tier: web\n    reads_config: |\n      \
                            size: \"{{children.config.data.size}}\"\n";

    const CONFIG: &str = "        apiVersion: v1\n        kind: ConfigMap\n        metadata:\n          name: \
                          \"{{metadata.name}}-config\"\n          labels:\n            {{> labels}}\n        data: { size: \"3\" }\n";

    fn load_errors(yaml: &str) -> String {
        match crate::load_str("rules.yaml", yaml) {
            Ok(_) => panic!("loads"),
            Err(errors) => errors.to_string(),
        }
    }

    #[test]
    fn a_reconciler_includes_its_files_partials_and_reads_what_they_read() {
        let yaml = file(PARTIALS, CONFIG);
        let rule = crate::test_rules::reconciler(&yaml, "shop");
        assert_eq!(
            crate::test_rules::rules(&yaml).len(),
            1,
            "the partials document is no rule"
        );
        let parent = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1"}});
        let rendered = crate::render_children(&rule, &parent, &serde_json::Map::new()).expect("renders");
        let config = &rendered.children[0];
        assert_eq!(config["metadata"]["labels"]["app"], "web");
        assert_eq!(config["metadata"]["labels"]["tier"], "web");
        assert_eq!(
            rule.child("copy").map(|child| child.depends_on.clone()),
            Some(vec!["config".to_string()]),
            "`children.config` in a partial is read by the child that includes it"
        );
        assert_eq!(rendered.waiting, ["copy"]);
    }

    #[test]
    fn an_unknown_partial_is_a_located_error_at_its_use() {
        let errors = load_errors(&file(PARTIALS, &CONFIG.replace("{{> labels}}", "{{> lables}}")));
        // `{{> lables}}` on the config template's sixth line: line 25 of the file, after 12 spaces.
        assert!(
            errors.contains("rules.yaml:25:13: error[template]: unknown partial `lables`"),
            "{errors}"
        );
    }

    #[test]
    fn a_broken_partial_is_a_located_error_in_its_text() {
        let errors = load_errors(&file(&PARTIALS.replace("tier: web", "tier: {{#if x}}web"), CONFIG));
        assert!(errors.contains("rules.yaml:8:"), "{errors}");
        assert!(errors.contains("template syntax error"), "{errors}");
        let errors = load_errors(&file(&PARTIALS.replace("tier: web", "tier: {{> labels}}"), CONFIG));
        assert!(errors.contains("rules.yaml:8:13: error[template]"), "{errors}");
        assert!(errors.contains("may not recurse"), "{errors}");
    }

    #[test]
    fn a_render_failing_inside_a_partial_points_at_the_partial_in_its_file() {
        // `labels`' second line (`tier: …`) is line 8 of the file, its `{{` at column 13.
        let yaml = file(&PARTIALS.replace("tier: web", "tier: {{spec.tier}}"), CONFIG);
        let rule = crate::test_rules::reconciler(&yaml, "shop");
        let parent = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "a"}});
        let error = crate::render_children(&rule, &parent, &serde_json::Map::new()).expect_err("spec.tier is missing");
        assert!(
            error.to_string().starts_with(
                "rules.yaml:8:13: child `config`: partial `labels` line 2: missing field `spec.tier` (templates are \
                 strict;"
            ),
            "{error}"
        );
        // A status template including it fails there too.
        // (Of a declared kind, whose status is the rule's to write.)
        let yaml = format!(
            "{}  status:\n    labels: {{ template: \"{{{{> labels}}}}\" }}\n---\n{}",
            yaml.replace(
                "for: { apiVersion: v1, kind: ConfigMap }",
                "for: { apiVersion: example.com/v1, kind: CronTab }"
            ),
            crate::test_rules::resource_definition("cron-tab.example.com", "")
        );
        let rule = crate::test_rules::reconciler(&yaml, "shop");
        let (_, failure) = crate::project_status(&rule, &parent, &serde_json::Map::new(), &serde_json::Map::new());
        let failure = failure.expect("the status template fails").to_string();
        assert!(
            failure.starts_with("rules.yaml:8:13: status field `labels`: partial `labels` line 2: missing field"),
            "{failure}"
        );
    }

    #[test]
    fn a_file_has_one_partials_document_and_names_are_identifiers() {
        let yaml = file(PARTIALS, CONFIG);
        let again = format!(
            "{yaml}---\napiVersion: ruleplane.dev/v1alpha1\nkind: TemplatePartials\nmetadata: {{ name: more }}\n\
             spec: {{ partials: {{ x: y }} }}\n"
        );
        assert!(load_errors(&again).contains("at most one `kind: TemplatePartials`"));
        let errors = load_errors(&file(&format!("{PARTIALS}    bad-name: x\n"), CONFIG));
        assert!(errors.contains("partial name `bad-name`"), "{errors}");
    }

    #[test]
    fn a_changed_partial_changes_the_rules_that_include_it() {
        let before = crate::test_rules::rules(&file(PARTIALS, CONFIG));
        let same = crate::test_rules::rules(&file(PARTIALS, CONFIG));
        let after = crate::test_rules::rules(&file(&PARTIALS.replace("tier: web", "tier: db"), CONFIG));
        assert!(matches!((&before[0], &same[0]), (Rule::Reconciler(a), Rule::Reconciler(b)) if a == b));
        assert!(matches!((&before[0], &after[0]), (Rule::Reconciler(a), Rule::Reconciler(b)) if a != b));
    }
}
