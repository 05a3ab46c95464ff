//! Partials: included by name, rendered in the including context and indentation, checked at load (unknown
//! names, arguments, recursion, nesting), and under the including template's budgets.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;

fn declare(declared: &[(&str, &str)]) -> (Partials, Vec<PartialProblem>) {
    let declared: BTreeMap<String, String> = declared
        .iter()
        .map(|(name, text)| (name.to_string(), text.to_string()))
        .collect();
    compile_partials(&declared)
}

fn compiled(declared: &[(&str, &str)]) -> Partials {
    let (partials, problems) = declare(declared);
    assert_eq!(problems, vec![]);
    partials
}

#[test]
fn a_partial_renders_in_the_including_context_and_takes_the_lines_indentation() {
    let partials = compiled(&[
        (
            "labels",
            "app: {{metadata.name}}\nteam: {{default metadata.labels.team \"none\"}}\n",
        ),
        ("zone", "{{this}}"),
    ]);
    let template = compile_template_with(
        "metadata:\n  labels:\n    {{> labels}}\ndata:\n{{#each spec.zones}}\n  z{{@index}}: {{> zone}}\n{{/each}}\n",
        &partials,
    )
    .expect("compiles");
    let data = json!({"metadata": {"name": "web"}, "spec": {"zones": ["a", "b"]}});
    let structured = template.render_structured(&data).expect("renders");
    let mut document: Value = serde_saphyr::from_str(structured.text()).expect("YAML");
    structured.fill(&mut document).expect("fills");
    assert_eq!(
        document,
        json!({"metadata": {"labels": {"app": "web", "team": "none"}}, "data": {"z0": "a", "z1": "b"}})
    );
}

#[test]
fn a_value_in_a_partial_cannot_change_the_documents_structure() {
    let partials = compiled(&[("labels", "app: {{metadata.name}}\n")]);
    let template = compile_template_with("labels:\n  {{> labels}}\n", &partials).expect("compiles");
    let data = json!({"metadata": {"name": "web\nevil: yes"}});
    let structured = template.render_structured(&data).expect("renders");
    let mut document: Value = serde_saphyr::from_str(structured.text()).expect("YAML");
    structured.fill(&mut document).expect("fills");
    assert_eq!(document, json!({"labels": {"app": "web\nevil: yes"}}));
}

#[test]
fn an_unknown_partial_is_a_problem_at_its_use() {
    let partials = compiled(&[("labels", "app: x")]);
    let problems = compile_template_with("a: 1\nb:\n  {{> lables}}\n", &partials).unwrap_err();
    assert_eq!((problems[0].line, problems[0].column), (3, 3));
    assert!(problems[0].message.contains("unknown partial `lables`"), "{problems:?}");
    assert!(check_template("{{> labels}}")[0].message.contains("unknown partial"));
}

#[test]
fn partials_take_no_arguments_and_partial_blocks_are_refused() {
    let partials = compiled(&[("labels", "app: x")]);
    for source in ["{{> labels spec}}", "{{> labels a=1}}", "{{> (lookup spec \"x\")}}"] {
        let problems = compile_template_with(source, &partials).unwrap_err();
        assert!(
            problems[0].message.contains("by its name alone"),
            "{source}: {problems:?}"
        );
    }
    let problems = compile_template_with("{{#> labels}}x{{/labels}}", &partials).unwrap_err();
    assert!(problems[0].message.contains("partial blocks"), "{problems:?}");
}

#[test]
fn a_partial_may_include_another_but_never_itself() {
    let partials = compiled(&[("outer", "[{{> inner}}]"), ("inner", "{{metadata.name}}")]);
    let template = compile_template_with("{{> outer}}", &partials).expect("compiles");
    assert_eq!(template.render(&json!({"metadata": {"name": "web"}})).unwrap(), "[web]");
    let (_, problems) = partials_of_cycle();
    assert!(!problems.is_empty());
    assert!(
        problems.iter().any(|p| p.problem.message.contains("may not recurse")),
        "{problems:?}"
    );
    let (_, problems) = declare(&[("me", "{{#if x}}{{> me}}{{/if}}")]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].name, "me");
    assert_eq!(
        (problems[0].problem.line, problems[0].problem.column),
        (1, 1 + "{{#if x}}".len())
    );
}

fn partials_of_cycle() -> (Partials, Vec<PartialProblem>) {
    declare(&[("a", "{{> b}}"), ("b", "x{{> c}}"), ("c", "{{> a}}")])
}

#[test]
fn nesting_through_partials_is_bounded_like_a_templates_own() {
    let blocks = |n: usize| "{{#if x}}".repeat(n) + "y" + &"{{/if}}".repeat(n);
    let deep = blocks(MAX_TEMPLATE_NESTING - 2);
    let partials = compiled(&[("deep", deep.as_str())]);
    assert!(
        compile_template_with("{{> deep}}", &partials).is_ok(),
        "within the bound"
    );
    let problems = compile_template_with("{{#if a}}{{#if b}}{{> deep}}{{/if}}{{/if}}", &partials).unwrap_err();
    assert!(problems[0].message.contains("more than"), "{problems:?}");
    // Partials nesting each other past the bound are refused where declared.
    let chain: Vec<(String, String)> = (0..12)
        .map(|i| {
            (
                format!("p{i}"),
                format!("{}{{{{> p{}}}}}{}", "{{#if x}}".repeat(3), i + 1, "{{/if}}".repeat(3)),
            )
        })
        .chain([("p12".to_string(), "end".to_string())])
        .collect();
    let declared: Vec<(&str, &str)> = chain.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let (_, problems) = declare(&declared);
    assert!(
        problems.iter().any(|p| p.problem.message.contains("more than")),
        "{problems:?}"
    );
}

#[test]
fn a_partials_output_counts_against_the_including_templates_budget() {
    let big = "x".repeat(MAX_RENDERED_BYTES / 4 + 1);
    let partials = compiled(&[("big", "{{@root.big}}")]);
    let template = compile_template_with("{{#each items}}{{> big}}{{/each}}", &partials).expect("compiles");
    let error = template
        .render(&json!({"big": big, "items": [1, 2, 3, 4, 5]}))
        .unwrap_err();
    assert_eq!(
        error,
        TemplateRenderError::OutputTooLarge {
            limit: MAX_RENDERED_BYTES
        }
    );
}

#[test]
fn a_template_carries_only_the_partials_it_includes_and_equal_texts_are_equal_partials() {
    let partials = compiled(&[("a", "{{> b}}"), ("b", "b"), ("c", "c")]);
    let template = compile_template_with("{{> a}}", &partials).expect("compiles");
    let mut used: Vec<&str> = template.partials().sources().collect();
    used.sort();
    assert_eq!(used, ["b", "{{> b}}"]);
    assert_eq!(partials, compiled(&[("a", "{{> b}}"), ("b", "b"), ("c", "c")]));
    assert_ne!(partials, compiled(&[("a", "{{> b}}"), ("b", "B"), ("c", "c")]));
}

#[test]
fn a_partial_may_not_write_raw_output() {
    let (_, problems) = declare(&[("raw", "a: 1\nb: {{{spec.x}}}")]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!((problems[0].problem.line, problems[0].problem.column), (2, 4));
    assert!(problems[0].problem.message.contains("raw output"), "{problems:?}");
}

#[test]
fn a_render_failing_inside_a_partial_names_it_and_its_own_line_and_column() {
    let partials = compiled(&[
        ("outer", "a: 1\nb: {{> inner}}"),
        ("inner", "x\n  y: {{#if (eq spec.size \"big\")}}z{{/if}}"),
        ("tier", "tier: {{spec.tier}}"),
    ]);
    let template = compile_template_with("one: 1\ntwo: 2\n{{> tier}}\n", &partials).expect("compiles");
    let error = template.render(&json!({"spec": {}})).unwrap_err();
    let tier = TemplateSpot {
        line: 1,
        column: 7,
        partial: Some("tier".into()),
    };
    assert_eq!(
        error,
        TemplateRenderError::MissingField {
            at: tier,
            path: "spec.tier".into()
        }
    );
    assert!(
        error
            .to_string()
            .starts_with("partial `tier` line 1: missing field `spec.tier`"),
        "{error}"
    );
    // Through another partial: the innermost, where the expression is written; a built-in helper's missing
    // argument is read from that partial's text.
    let template = compile_template_with("{{> outer}}", &partials).expect("compiles");
    let error = template.render(&json!({"spec": {}})).unwrap_err();
    assert!(
        matches!(&error, TemplateRenderError::MissingField { at, path }
            if at.partial.as_deref() == Some("inner") && at.line == 2 && path == "spec.size"),
        "{error:?}"
    );
    // In the template's own text, no partial is named.
    let error = template_error("a: 1\nb: {{spec.x}}\n{{> tier}}", &partials);
    assert_eq!(error.spot(), Some(&TemplateSpot::in_template(2, 4)));
}

fn template_error(source: &str, partials: &Partials) -> TemplateRenderError {
    let template = compile_template_with(source, partials).expect("compiles");
    template.render(&json!({"spec": {}})).unwrap_err()
}
