//! The template sandbox: compile checks, structure-preserving renders, budgets, errors located in the template.

use super::*;
use serde_json::json;

fn render(source: &str, data: Value) -> Result<String, TemplateRenderError> {
    assert_eq!(check_template(source), vec![], "{source}");
    render_template(source, &data)
}

#[test]
fn helpers_work() {
    let data = json!({"spec": {"image": "nginx:1.10", "n": 3, "res": {"cpu": "1"}}, "t": "a&b"});
    assert_eq!(render("{{json spec.image}}", data.clone()).unwrap(), "\"nginx:1.10\"");
    assert_eq!(render("{{t}}", data.clone()).unwrap(), "a&b");
    assert_eq!(render("{{default spec.missing \"x\"}}", data.clone()).unwrap(), "x");
    assert_eq!(render("{{default spec.n 1}}", data.clone()).unwrap(), "3");
    assert_eq!(render("{{upper (trunc spec.image 5)}}", data.clone()).unwrap(), "NGINX");
    assert_eq!(render("{{b64dec (b64enc t)}}", data.clone()).unwrap(), "a&b");
    assert_eq!(render("{{quote spec.n}}", data.clone()).unwrap(), "\"3\"");
    assert_eq!(
        render("{{indent 2 (yaml spec.res)}}", data.clone()).unwrap(),
        "  cpu: \"1\""
    );
    assert_eq!(render("{{jsonpath spec \"{.res.cpu}\"}}", data.clone()).unwrap(), "1");
    assert_eq!(render("{{sha256 \"\"}}", data.clone()).unwrap().len(), 64);
    assert_eq!(render("{{#if spec.nothing}}y{{else}}n{{/if}}", data).unwrap(), "n");
}

#[test]
fn missing_fields_are_errors_with_the_template_line() {
    let error = render("a: 1\nb: {{spec.nope}}\n", json!({"spec": {}})).unwrap_err();
    assert_eq!(
        error,
        TemplateRenderError::MissingField {
            at: TemplateSpot::in_template(2, 4),
            path: "spec.nope".into()
        }
    );
    let error = render("{{json spec.nope}}", json!({"spec": {}})).unwrap_err();
    assert!(matches!(error, TemplateRenderError::MissingField { .. }), "{error}");
}

#[test]
fn sandbox_rejects_partials_and_unknown_helpers() {
    assert!(check_template("{{> other}}")[0].message.contains("partials"));
    assert!(
        check_template("{{#*inline \"x\"}}y{{/inline}}")[0]
            .message
            .contains("inline")
    );
    let problems = check_template("a\n  {{jsn spec}}");
    assert_eq!((problems[0].line, problems[0].column), (2, 3));
    assert!(problems[0].message.contains("did you mean `json`"), "{problems:?}");
    assert!(check_template("{{#each x}}{{/if}}")[0].message.contains("syntax"));
}

#[test]
fn output_budget_is_enforced() {
    let big = "x".repeat(MAX_RENDERED_BYTES / 4 + 1);
    let error = render_template("{{a}}{{a}}{{a}}{{a}}", &json!({"a": big})).unwrap_err();
    assert_eq!(
        error,
        TemplateRenderError::OutputTooLarge {
            limit: MAX_RENDERED_BYTES
        }
    );
}

fn structured(source: &str, data: Value) -> Value {
    let template = compile_template(source).expect("compiles");
    let out = template.render_structured(&data).expect("renders");
    let mut documents = crate::yaml_tree::parse_json_documents(out.text()).expect("parses");
    let mut document = documents.remove(0);
    out.fill(&mut document).expect("fills");
    document
}

#[test]
fn structured_values_fill_scalars_and_nodes_keep_their_type() {
    let data = json!({"s": "a: b\nc: d", "n": 8080, "m": {"cpu": "1"}, "l": ["x", "y"], "safe": "nginx:1.25"});
    let document = structured(
        "plain: {{s}}\nnumber: {{n}}\nsafe: {{safe}}\nnode: {{json m}}\nlist:\n{{indent 2 (yaml l)}}\nquoted: {{quote n}}\n{{s}}: key",
        data,
    );
    assert_eq!(
        document,
        json!({"plain": "a: b\nc: d", "number": 8080, "safe": "nginx:1.25", "node": {"cpu": "1"},
               "list": ["x", "y"], "quoted": "8080", "a: b\nc: d": "key"})
    );
}

#[test]
fn a_raw_value_cannot_forge_a_placeholder() {
    let data = json!({"secret": {"k": "v"}, "evil": "\u{E000}0\u{E001}"});
    let document = structured("a: {{json secret}}\nb: x{{{evil}}}", data);
    assert_eq!(document, json!({"a": {"k": "v"}, "b": "x0"}));
}

#[test]
fn keys_that_collide_once_filled_are_an_error() {
    let template = compile_template("{{a}}: 1\n{{b}}: 2").expect("compiles");
    let out = template
        .render_structured(&json!({"a": "x\ny", "b": "x\ny"}))
        .expect("renders");
    let mut document = crate::yaml_tree::parse_json_documents(out.text())
        .expect("parses")
        .remove(0);
    assert!(matches!(out.fill(&mut document), Err(FillError::DuplicateKey { .. })));
}

#[test]
fn masked_text_shows_no_value() {
    let template = compile_template("name: {{n}}\npassword: {{json p}}").expect("compiles");
    let masked = template
        .render_masked(&json!({"n": "web", "p": "hunter2"}))
        .expect("renders");
    assert_eq!(masked, "name: <value>\npassword: <value>");
}

#[test]
fn nesting_and_size_and_placeholder_characters_are_refused_at_load() {
    let deep = format!(
        "{}x{}",
        "{{#if a}}".repeat(MAX_TEMPLATE_NESTING + 1),
        "{{/if}}".repeat(MAX_TEMPLATE_NESTING + 1)
    );
    assert!(
        check_template(&deep)[0].message.contains("nests"),
        "{:?}",
        check_template(&deep)
    );
    let shallow = format!("{}x{}", "{{#if a}}".repeat(8), "{{/if}}".repeat(8));
    assert_eq!(check_template(&shallow), vec![]);
    let parentheses = format!("{{{{len {}a{}}}}}", "(len ".repeat(40), ")".repeat(40));
    assert!(check_template(&parentheses)[0].message.contains("nests"));
    assert_eq!(
        check_template(&"(".repeat(100)),
        vec![],
        "parentheses outside `{{…}}` are text"
    );
    assert!(check_template("a\n  b\u{E000}")[0].message.contains("U+E000"));
    assert_eq!(
        (
            check_template("a\n  b\u{E000}")[0].line,
            check_template("a\n  b\u{E000}")[0].column
        ),
        (2, 4)
    );
    assert!(
        check_template(&"x".repeat(MAX_TEMPLATE_BYTES + 1))[0]
            .message
            .contains("bytes")
    );
}

#[test]
fn a_loop_that_writes_nothing_still_runs_out_of_time() {
    let items: Vec<u32> = (0..400).collect();
    let source = "{{#each l}}{{#each ../l}}{{#each ../../l}}{{/each}}{{/each}}{{/each}}done";
    let error = render_template(source, &json!({"l": items})).expect_err("64 million iterations take more than 1 s");
    assert_eq!(error, TemplateRenderError::TooSlow { limit: MAX_RENDER_TIME });
}

#[test]
fn errors_inside_loops_keep_their_template_line() {
    let error = render_template(
        "a: 1\n{{#each l}}\n  {{this.nope}}\n{{/each}}",
        &json!({"l": [{"x": 1}]}),
    )
    .unwrap_err();
    assert!(
        matches!(&error, TemplateRenderError::MissingField { at, .. } if at.line == 3 && at.partial.is_none()),
        "{error:?}"
    );
}

#[test]
fn a_built_in_helper_on_a_missing_field_says_missing_field_as_every_helper_does() {
    let data = json!({"spec": {"tier": "gold"}});
    for (source, path) in [
        ("{{#if (eq spec.size \"big\")}}x{{/if}}", "spec.size"),
        ("{{ne spec.tier spec.other}}", "spec.other"),
        ("\n{{#if (and spec.tier (not spec.off))}}x{{/if}}", "spec.off"),
        ("{{lt spec.count 3}}", "spec.count"),
        ("{{upper spec.missing}}", "spec.missing"),
    ] {
        let error = render(source, data.clone()).expect_err(source);
        assert!(
            matches!(&error, TemplateRenderError::MissingField { path: found, .. } if found == path),
            "{source}: {error}"
        );
        assert!(error.to_string().contains("(templates are strict;"), "{error}");
    }
}
