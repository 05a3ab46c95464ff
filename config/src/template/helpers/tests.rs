//! Tests of every template helper: results, edge cases, errors and their messages, arity at load time.

use serde_json::{Value, json};

use super::{HELPERS, MAX_WIDTH, PureHelper};
use crate::template::{MAX_RENDERED_BYTES, check_template, compile_template, render_template};

/// Calls a helper directly: the typed value, or its message (without the helper's name).
fn call(name: &str, args: Value) -> Result<Value, String> {
    let helper = PureHelper::ALL.iter().find(|h| h.name == name).expect("a helper");
    let args = args.as_array().expect("a list of arguments").clone();
    assert!(helper.arity_problem(args.len()).is_none(), "{name} with {args:?}");
    (helper.run)(&args)
}

fn ok(name: &str, args: Value) -> Value {
    call(name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn err(name: &str, args: Value) -> String {
    match call(name, args) {
        Ok(value) => panic!(
            "{name} should fail, gave {}",
            value.to_string().chars().take(200).collect::<String>()
        ),
        Err(message) => message,
    }
}

/// Renders `source` over `data` as text; an error as its message.
fn render(source: &str, data: Value) -> Result<String, String> {
    assert_eq!(check_template(source), vec![], "{source}");
    render_template(source, &data).map_err(|e| e.to_string())
}

/// Renders a YAML document the way children are rendered: structured, parsed, filled.
fn structured(source: &str, data: Value) -> Value {
    let template = compile_template(source).expect("compiles");
    let out = template.render_structured(&data).expect("renders");
    let mut document = crate::yaml_tree::parse_json_documents(out.text())
        .expect("parses")
        .remove(0);
    out.fill(&mut document).expect("fills");
    document
}

#[test]
fn the_public_list_names_every_helper_in_the_table() {
    let names: Vec<&str> = PureHelper::ALL.iter().map(|h| h.name).collect();
    assert_eq!(names, HELPERS);
}

#[test]
fn integers_stay_integers_and_floats_spread() {
    assert_eq!(ok("add", json!([1, 2])), json!(3));
    assert_eq!(ok("add", json!([1, 2, 3, 4])), json!(10));
    assert_eq!(ok("add", json!([1, 0.5])), json!(1.5));
    assert_eq!(ok("sub", json!([1, 5])), json!(-4));
    assert_eq!(ok("mul", json!([3, 4, 5])), json!(60));
    assert_eq!(ok("mul", json!([2, 1.5])), json!(3.0));
    assert_eq!(ok("div", json!([7, 2])), json!(3), "integer division truncates");
    assert_eq!(ok("div", json!([-7, 2])), json!(-3), "toward zero");
    assert_eq!(ok("div", json!([7.0, 2])), json!(3.5));
    assert_eq!(ok("mod", json!([7, 3])), json!(1));
    assert_eq!(ok("mod", json!([-7, 3])), json!(-1), "the dividend's sign");
    assert_eq!(ok("mod", json!([7.5, 2])), json!(1.5));
    // 2.0 is a float, and stays one: `eq` tells 2 from 2.0 (see `comparisons_work_with_computed_numbers`).
    assert_eq!(ok("add", json!([1.5, 0.5])), json!(2.0));
    assert!(ok("add", json!([1.5, 0.5])).is_f64());
}

#[test]
fn arithmetic_errors_name_their_cause() {
    assert_eq!(err("div", json!([1, 0])), "division by zero");
    assert_eq!(err("mod", json!([1, 0])), "division by zero");
    assert_eq!(err("div", json!([1.5, 0.0])), "division by zero");
    assert_eq!(
        err("add", json!([i64::MAX, 1])),
        "integer overflow (integers are 64-bit signed)"
    );
    assert!(err("mul", json!([i64::MAX, 2])).contains("overflow"));
    assert!(err("sub", json!([i64::MIN, 1])).contains("overflow"));
    assert!(err("div", json!([i64::MIN, -1])).contains("overflow"));
    assert_eq!(err("mul", json!([1e308, 10.0])), "the result is not a finite number");
    assert_eq!(
        err("add", json!(["3", 1])),
        "expects numbers, got the string \"3\"; convert text with `parseInt` or `parseFloat`"
    );
    assert_eq!(err("add", json!([true, 1])), "expects numbers, got a boolean");
    assert_eq!(err("add", json!([null, 1])), "expects numbers, got null");
    assert!(err("add", json!([u64::MAX, 0])).contains("beyond the 64-bit signed integer range"));
}

#[test]
fn a_render_error_names_the_helper_and_the_line() {
    let error = render("a: 1\nb: {{div spec.n 0}}", json!({"spec": {"n": 4}})).unwrap_err();
    assert_eq!(error, "template line 2: div: division by zero");
}

#[test]
fn min_and_max_take_numbers_or_one_list() {
    assert_eq!(ok("min", json!([3, 1, 2])), json!(1));
    assert_eq!(ok("max", json!([3, 1.5, 2])), json!(3));
    assert_eq!(ok("max", json!([1, 2.5])), json!(2.5));
    assert_eq!(ok("max", json!([[4, 9, 2]])), json!(9));
    assert_eq!(ok("min", json!([7])), json!(7));
    assert_eq!(ok("min", json!([-1, -1.5])), json!(-1.5));
    assert_eq!(
        err("max", json!([[]])),
        "expects at least one number, got an empty list"
    );
    assert!(err("min", json!([1, "2"])).contains("the string \"2\""));
}

#[test]
fn comparisons_work_with_computed_numbers() {
    let data = json!({"n": 3, "f": 2.5});
    let r = |source: &str| render(source, data.clone()).unwrap();
    assert_eq!(r("{{#if (gt (add n 1) 3)}}y{{else}}n{{/if}}"), "y");
    assert_eq!(r("{{#if (eq (mul n 2) 6)}}y{{else}}n{{/if}}"), "y");
    assert_eq!(r("{{#if (lt (add f 1) n)}}y{{else}}n{{/if}}"), "n", "3.5 < 3");
    assert_eq!(
        r("{{#if (gte (add f 0.5) n)}}y{{else}}n{{/if}}"),
        "y",
        "3.0 >= 3, compared as numbers"
    );
    // `eq` compares JSON values exactly: the float 3.0 is not the integer 3.
    assert_eq!(r("{{#if (eq (add f 0.5) n)}}y{{else}}n{{/if}}"), "n");
    assert_eq!(
        r("{{#if (mod n 2)}}odd{{else}}even{{/if}}"),
        "odd",
        "0 is false in `#if`"
    );
    assert_eq!(r("{{#if (and (gt n 1) (lt n 5))}}y{{/if}}"), "y");
    // Handlebars compares a number with text of digits numerically, and two texts as text.
    assert_eq!(r("{{#if (gt \"10\" 9)}}y{{else}}n{{/if}}"), "y");
    assert_eq!(r("{{#if (gt \"10\" \"9\")}}y{{else}}n{{/if}}"), "n");
    assert_eq!(r("{{add n 1}}"), "4");
    assert_eq!(r("{{div f 2}}"), "1.25");
}

#[test]
fn len_counts_characters_items_and_keys() {
    assert_eq!(ok("len", json!(["héllo"])), json!(5), "characters, not bytes");
    assert_eq!(ok("len", json!([[1, 2]])), json!(2));
    assert_eq!(ok("len", json!([{"a": 1}])), json!(1));
    assert_eq!(ok("len", json!([null])), json!(0));
    assert_eq!(
        err("len", json!([3])),
        "expects a string, a list or a mapping, got a number"
    );
    assert_eq!(
        render("{{#if (gt (len l) 1)}}many{{/if}}", json!({"l": [1, 2]})).unwrap(),
        "many"
    );
}

#[test]
fn string_helpers() {
    assert_eq!(ok("split", json!(["a,b,,c", ","])), json!(["a", "b", "", "c"]));
    assert_eq!(ok("split", json!(["", ","])), json!([""]));
    assert_eq!(ok("split", json!(["añb", ""])), json!(["a", "ñ", "b"]));
    assert_eq!(ok("join", json!([["a", 1, true], "-"])), json!("a-1-true"));
    assert_eq!(ok("join", json!([[], "-"])), json!(""));
    assert_eq!(
        err("join", json!([[["x"]], "-"])),
        "expects text, got a list; use `json` or `yaml` to write structured values"
    );
    assert_eq!(err("join", json!(["a", "-"])), "expects a list, got a string");
    assert_eq!(ok("replace", json!(["a.b.c", ".", "-"])), json!("a-b-c"));
    assert_eq!(ok("replace", json!(["aaa", "aa", "b"])), json!("ba"));
    assert_eq!(
        err("replace", json!(["a", "", "b"])),
        "the text to replace must not be empty"
    );
    assert_eq!(ok("trim", json!(["  a b \n"])), json!("a b"));
    assert_eq!(ok("substr", json!(["kubernetes", 4])), json!("rnetes"));
    assert_eq!(ok("substr", json!(["kubernetes", 0, 4])), json!("kube"));
    assert_eq!(ok("substr", json!(["añb", 1, 2])), json!("ñ"), "characters, not bytes");
    assert_eq!(ok("substr", json!(["abc", 1, 99])), json!("bc"), "clamped");
    assert_eq!(ok("substr", json!(["abc", 9])), json!(""));
    assert_eq!(
        err("substr", json!(["abc", 2, 1])),
        "the end (1) is before the start (2)"
    );
    assert_eq!(
        err("substr", json!(["abc", -1])),
        "the start must be a non-negative integer, got -1"
    );
    assert_eq!(ok("hasPrefix", json!(["nginx:1.25", "nginx:"])), json!(true));
    assert_eq!(ok("hasSuffix", json!(["nginx:1.25", "1.24"])), json!(false));
    assert_eq!(ok("contains", json!(["team-a", "m-a"])), json!(true));
    assert_eq!(ok("contains", json!([["tls", "http2"], "tls"])), json!(true));
    assert_eq!(ok("contains", json!([[1, 2], 3])), json!(false));
    assert_eq!(ok("contains", json!([{"tls": false}, "tls"])), json!(true), "a key");
    assert_eq!(
        ok("title", json!(["hello wide-world x_y"])),
        json!("Hello Wide-World X_y")
    );
    assert_eq!(ok("title", json!(["élan vital"])), json!("Élan Vital"));
    assert_eq!(ok("toString", json!([3])), json!("3"));
    assert_eq!(
        ok("toString", json!([{"b": 1, "a": [true]}])),
        json!("{\"a\":[true],\"b\":1}")
    );
    assert_eq!(ok("toString", json!([null])), json!(""));
}

#[test]
fn text_becomes_a_number_only_when_parsed() {
    assert_eq!(ok("parseInt", json!(["42"])), json!(42));
    assert_eq!(ok("parseInt", json!(["-7"])), json!(-7));
    assert_eq!(ok("parseInt", json!(["ff", 16])), json!(255));
    assert_eq!(ok("parseInt", json!([12])), json!(12));
    assert_eq!(
        err("parseInt", json!([" 42"])),
        "\" 42\" is not a base-10 integer (64-bit signed)"
    );
    assert_eq!(
        err("parseInt", json!(["1.5"])),
        "\"1.5\" is not a base-10 integer (64-bit signed)"
    );
    assert!(err("parseInt", json!(["99999999999999999999"])).contains("not a base-10 integer"));
    assert_eq!(
        err("parseInt", json!(["1", 37])),
        "the base must be from 2 to 36, got 37"
    );
    assert_eq!(err("parseInt", json!([1.5])), "1.5 is not an integer");
    assert_eq!(ok("parseFloat", json!(["1.5"])), json!(1.5));
    assert_eq!(ok("parseFloat", json!(["2e3"])), json!(2000.0));
    assert_eq!(ok("parseFloat", json!([3])), json!(3.0));
    assert_eq!(err("parseFloat", json!(["inf"])), "\"inf\" is not a number");
    assert_eq!(err("parseFloat", json!(["NaN"])), "\"NaN\" is not a number");
    assert_eq!(err("parseFloat", json!([[1]])), "expects text or a number, got a list");
    let data = json!({"metadata": {"annotations": {"replicas": "3"}}});
    assert_eq!(
        render("{{add (parseInt metadata.annotations.replicas) 1}}", data).unwrap(),
        "4"
    );
}

#[test]
fn format_writes_a_printf_subset() {
    let f = |args: Value| ok("format", args).as_str().unwrap().to_string();
    assert_eq!(f(json!(["%s-%d", "web", 3])), "web-3");
    assert_eq!(f(json!(["%05d|%-5d|%5d", 42, 42, -42])), "00042|42   |  -42");
    assert_eq!(f(json!(["%05d", -42])), "-0042", "zeros after the sign");
    assert_eq!(f(json!(["%f %.2f %.0f", 1.5, 1.23856, 2.5])), "1.500000 1.24 2");
    assert_eq!(f(json!(["%.1f", 3])), "3.0", "an integer formats as a float");
    assert_eq!(f(json!(["%x %x %04x", 255, -255, 10])), "ff -ff 000a");
    assert_eq!(f(json!(["%x", "hi"])), "6869", "text as the hex of its bytes");
    assert_eq!(f(json!(["%q", "a \"b\"\n"])), "\"a \\\"b\\\"\\n\"");
    assert_eq!(f(json!(["%v %v %v", [1], true, 2.5])), "[1] true 2.5");
    assert_eq!(f(json!(["%.3s|%6s|%-4s|", "abcdef", "ñ", "a"])), "abc|     ñ|a   |");
    assert_eq!(f(json!(["100%%"])), "100%");
    assert_eq!(f(json!([""])), "");
    assert_eq!(
        err("format", json!(["%d", 1.5])),
        "`%d` expects an integer, got 1.5; use `%.0f`"
    );
    assert_eq!(
        err("format", json!(["%d", "3"])),
        "expects numbers, got the string \"3\"; convert text with `parseInt` or `parseFloat`"
    );
    assert_eq!(err("format", json!(["%s %s", "a"])), "`%s` has no argument left");
    assert_eq!(
        err("format", json!(["%s", "a", "b"])),
        "2 arguments given, 1 not used by the format"
    );
    assert_eq!(
        err("format", json!(["%y", 1])),
        "unknown verb `%y` (supported: %s %d %f %x %q %v %%)"
    );
    assert_eq!(
        err("format", json!(["50%"])),
        "the format ends inside a verb (write `%%` for a percent sign)"
    );
    assert_eq!(
        err("format", json!(["%.2d", 1])),
        "a precision applies to `%s` and `%f`, not `%d`"
    );
    assert_eq!(
        err("format", json!(["%257d", 1])),
        format!("a width must be at most {MAX_WIDTH}")
    );
    assert_eq!(
        err("format", json!(["%99999999999999999999999d", 1])),
        "a width must be at most 256"
    );
    assert_eq!(err("format", json!(["%.300f", 1])), "a precision must be at most 256");
    assert_eq!(f(json!(["%256d", 1])).len(), 256);
    assert_eq!(
        err("format", json!([3])),
        "the first argument must be the format text, got a number"
    );
}

#[test]
fn list_and_mapping_helpers() {
    assert_eq!(ok("first", json!([[1, 2]])), json!(1));
    assert_eq!(ok("last", json!([[1, 2]])), json!(2));
    assert_eq!(
        ok("first", json!([[]])),
        json!(null),
        "an empty list has no first item: null"
    );
    assert_eq!(err("last", json!(["ab"])), "expects a list, got a string");
    let nested = json!({"a": [{"b": "x"}], "c.d": 1});
    assert_eq!(ok("index", json!([nested, "a", 0, "b"])), json!("x"));
    assert_eq!(ok("index", json!([nested, "c.d"])), json!(1), "a key, not a path");
    assert_eq!(ok("index", json!([[10, 20], 1])), json!(20));
    assert_eq!(
        err("index", json!([[10, 20], 2])),
        "index 2 is out of range for a list of 2"
    );
    assert_eq!(
        err("index", json!([{"a": 1}, "b"])),
        "no key \"b\" (use `dig` for a default)"
    );
    assert_eq!(
        err("index", json!([[1], "x"])),
        "a list index must be a non-negative integer, got x"
    );
    assert_eq!(err("index", json!([3, 0])), "cannot index a number");
    assert_eq!(ok("dig", json!([nested, "a", 0, "b", "none"])), json!("x"));
    assert_eq!(ok("dig", json!([nested, "a", 5, "b", "none"])), json!("none"));
    assert_eq!(ok("dig", json!([nested, "z", "y", {"k": 1}])), json!({"k": 1}));
    assert_eq!(
        ok("dig", json!([{"a": null}, "a", 0])),
        json!(0),
        "null takes the default"
    );
    assert_eq!(
        ok("dig", json!([{"a": false}, "a", true])),
        json!(false),
        "false is a value"
    );
    let map = json!({"b": 2, "a": 1, "c": {"x": 0}});
    assert_eq!(ok("keys", json!([map])), json!(["a", "b", "c"]));
    assert_eq!(
        ok("values", json!([map])),
        json!([1, 2, {"x": 0}]),
        "in the order of the sorted keys"
    );
    assert_eq!(err("keys", json!([[1]])), "expects a mapping, got a list");
    assert_eq!(ok("sort", json!([["b", "a", "B"]])), json!(["B", "a", "b"]));
    assert_eq!(ok("sort", json!([[3, 1.5, -2, 10]])), json!([-2, 1.5, 3, 10]));
    assert_eq!(ok("sort", json!([[]])), json!([]));
    assert_eq!(
        err("sort", json!([[1, "a"]])),
        "expects a list of strings or a list of numbers"
    );
    assert_eq!(
        ok("uniq", json!([["b", "a", "b", 1, 1, {"k": 1}, {"k": 1}]])),
        json!(["b", "a", 1, {"k": 1}])
    );
    assert_eq!(ok("slice", json!([[1, 2, 3, 4], 1, 3])), json!([2, 3]));
    assert_eq!(ok("slice", json!([[1, 2, 3], 2])), json!([3]));
    assert_eq!(ok("slice", json!([[1, 2, 3], 5])), json!([]), "clamped");
    assert_eq!(
        ok("slice", json!(["abcd", 1, 3])),
        json!("bc"),
        "text slices like substr"
    );
    assert_eq!(err("slice", json!([[1], 1, 0])), "the end (0) is before the start (1)");
    assert_eq!(
        ok(
            "merge",
            json!([{"a": 1, "b": {"x": 1}}, {"b": {"y": 2}}, null, {"c": 3}])
        ),
        json!({"a": 1, "b": {"y": 2}, "c": 3}),
        "top-level keys, later wins; null is empty"
    );
    assert_eq!(err("merge", json!([{}, [1]])), "expects a mapping, got a list");
}

#[test]
fn lists_feed_each_and_json() {
    let data = json!({"spec": {"zones": "a,b,c", "labels": {"team": "x", "tier": "web"}}});
    assert_eq!(
        render(
            "{{#each (split spec.zones \",\")}}[{{@index}}={{this}}]{{/each}}",
            data.clone()
        )
        .unwrap(),
        "[0=a][1=b][2=c]"
    );
    assert_eq!(
        render("{{json (sort (split spec.zones \",\"))}}", data.clone()).unwrap(),
        "[\"a\",\"b\",\"c\"]"
    );
    assert_eq!(
        render(
            "{{join (keys (merge spec.labels (fromJson \"{\\\"app\\\":1}\"))) \",\"}}",
            data.clone()
        )
        .unwrap(),
        "app,team,tier"
    );
    assert_eq!(
        structured(
            "zones: {{json (split spec.zones \",\")}}\nfirst: {{first (split spec.zones \",\")}}",
            data
        ),
        json!({"zones": ["a", "b", "c"], "first": "a"})
    );
}

#[test]
fn a_list_written_as_text_is_an_error_not_text() {
    let data = json!({"spec": {"zones": "a,b"}});
    let error = render("zones: {{split spec.zones \",\"}}", data.clone()).unwrap_err();
    assert_eq!(
        error,
        "template line 1: split: returns a list, which cannot be written as text; use it in a subexpression, \
         `{{#each (split …)}}` or `{{json (split …)}}`"
    );
    let error = render("{{merge spec spec}}", data.clone()).unwrap_err();
    assert!(error.contains("merge: returns a mapping"), "{error}");
    // Structured renders (children) refuse it the same way.
    let template = compile_template("a: {{split spec.zones \",\"}}").expect("compiles");
    assert!(template.render_structured(&data).is_err());
    // `jsonpath` and `default` keep their old text for compatibility.
    assert_eq!(render("{{jsonpath spec \"{.zones}\"}}", data).unwrap(), "a,b");
}

/// A helper's result is a value like any other: in a value position it fills in a scalar and can never add a
/// key, whatever text it computes.
#[test]
fn helper_results_cannot_change_the_structure() {
    let data = json!({"spec": {"team": "x|  namespace: kube-system", "name": "a: b"}});
    let document = structured(
        "metadata:\n  name: web\n  labels:\n    team: {{replace spec.team \"|\" \"\\n\"}}\n    other: {{format \"%s\" spec.name}}\n    joined: {{join (split spec.team \"|\") \"\\n\"}}\n    t: {{title (fromJson \"\\\"x\\\\n  namespace: y\\\"\")}}\n  annotations: { a: {{trim spec.name}} }",
        data,
    );
    assert_eq!(
        document,
        json!({"metadata": {"name": "web", "labels": {
            "team": "x\n  namespace: kube-system",
            "other": "a: b",
            "joined": "x\n  namespace: kube-system",
            "t": "X\n  Namespace: Y",
        }, "annotations": {"a": "a: b"}}})
    );
}

#[test]
fn digests_and_encodings() {
    assert_eq!(
        ok("sha1", json!(["abc"])),
        json!("a9993e364706816aba3e25717850c26c9cd0d89d")
    );
    assert_eq!(
        ok("sha1", json!([""])),
        json!("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    assert_eq!(ok("fnv64a", json!([""])), json!("cbf29ce484222325"));
    assert_eq!(ok("fnv64a", json!(["a"])), json!("af63dc4c8601ec8c"));
    assert_eq!(ok("fnv64a", json!(["foobar"])), json!("85944171f73967e8"));
    assert_eq!(
        ok("toJson", json!([{"b": [1], "a": "x"}])),
        json!("{\"a\":\"x\",\"b\":[1]}")
    );
    assert_eq!(ok("toYaml", json!([{"a": 1}])), json!("a: 1"));
    assert_eq!(
        ok("fromJson", json!(["{\"a\":[1,2.5,null]}"])),
        json!({"a": [1, 2.5, null]})
    );
    assert_eq!(ok("fromJson", json!(["3"])), json!(3));
    assert!(err("fromJson", json!(["{"])).starts_with("invalid JSON: "));
    assert_eq!(err("fromJson", json!([3])), "expects JSON text, got a number");
    assert!(err("fromJson", json!([format!("{}1{}", "[".repeat(200), "]".repeat(200))])).contains("recursion"));
    // b64enc encodes the text's UTF-8 bytes.
    assert_eq!(ok("b64enc", json!(["é"])), json!("w6k="));
    let data = json!({"spec": {"m": {"cpu": "1"}}});
    assert_eq!(
        structured("a: {{toJson spec.m}}\nb:\n{{indent 2 (toYaml spec.m)}}", data),
        json!({"a": {"cpu": "1"}, "b": {"cpu": "1"}}),
        "toJson and toYaml insert whole nodes like json and yaml"
    );
}

#[test]
fn cidr_subnet_matches_terraform() {
    let c = |prefix: &str, newbits: u64, netnum: u64| ok("cidrSubnet", json!([prefix, newbits, netnum]));
    assert_eq!(c("10.0.0.0/16", 8, 2), json!("10.0.2.0/24"));
    assert_eq!(c("172.16.0.0/12", 4, 2), json!("172.18.0.0/16"));
    assert_eq!(c("10.1.2.0/24", 4, 15), json!("10.1.2.240/28"));
    assert_eq!(c("10.0.0.5/16", 8, 2), json!("10.0.2.0/24"), "host bits ignored");
    assert_eq!(c("10.0.0.0/8", 0, 0), json!("10.0.0.0/8"));
    assert_eq!(c("0.0.0.0/0", 32, 4294967295), json!("255.255.255.255/32"));
    assert_eq!(
        c("fd00:fd12:3456:7890::/56", 16, 162),
        json!("fd00:fd12:3456:7800:a200::/72")
    );
    assert_eq!(c("2001:db8::/32", 96, 1), json!("2001:db8::1/128"));
    assert_eq!(c("::/0", 64, u64::MAX), json!("ffff:ffff:ffff:ffff::/64"));
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0.0/16", 8, 256])),
        "prefix extension of 8 does not accommodate a subnet numbered 256"
    );
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0.0/30", 3, 0])),
        "insufficient address space to extend prefix of 30 by 3"
    );
    assert_eq!(
        err("cidrSubnet", json!(["2001:db8::/64", 65, 0])),
        "insufficient address space to extend prefix of 64 by 65"
    );
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0.0", 8, 0])),
        "invalid CIDR prefix \"10.0.0.0\""
    );
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0.0/33", 1, 0])),
        "invalid CIDR prefix \"10.0.0.0/33\""
    );
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0/8", 1, 0])),
        "invalid CIDR prefix \"10.0.0/8\""
    );
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0.0/+8", 1, 0])),
        "invalid CIDR prefix \"10.0.0.0/+8\""
    );
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0.0/8", -1, 0])),
        "newbits must be a non-negative integer, got -1"
    );
    assert_eq!(
        err("cidrSubnet", json!(["10.0.0.0/8", 1, -1])),
        "netnum must be a non-negative integer, got -1"
    );
    assert_eq!(
        err("cidrSubnet", json!([3, 1, 0])),
        "the prefix must be text such as \"10.0.0.0/16\", got a number"
    );
    assert_eq!(
        render("{{cidrSubnet spec.cidr 8 2}}", json!({"spec": {"cidr": "10.0.0.0/16"}})).unwrap(),
        "10.0.2.0/24"
    );
}

#[test]
fn results_larger_than_a_rendered_object_are_refused_before_they_are_built() {
    let big = "ab".repeat(2000);
    let message = format!("the result would exceed {MAX_RENDERED_BYTES} bytes");
    assert_eq!(err("replace", json!([big, "a", "x".repeat(1000)])), message);
    assert_eq!(err("join", json!([vec!["x"; 1000], "y".repeat(2000)])), message);
    assert_eq!(err("indent", json!([256, "a\n".repeat(5000)])), message);
    assert_eq!(
        ok("replace", json!(["ab".repeat(10), "a", "xyz"]))
            .as_str()
            .unwrap()
            .len(),
        40
    );
}

#[test]
fn arity_is_checked_at_load() {
    let problems = check_template("a\n  {{add 1}}");
    assert_eq!((problems[0].line, problems[0].column), (2, 3));
    assert_eq!(problems[0].message, "helper `add` takes 2 to 16 arguments, got 1");
    assert_eq!(
        check_template("{{cidrSubnet \"10.0.0.0/8\" 1}}")[0].message,
        "helper `cidrSubnet` takes 3 arguments, got 2"
    );
    assert_eq!(
        check_template("{{len a b}}")[0].message,
        "helper `len` takes 1 argument, got 2"
    );
    assert_eq!(
        check_template("{{#each (split a)}}{{/each}}")[0].message,
        "helper `split` takes 2 arguments, got 1"
    );
    assert_eq!(
        check_template("{{sub 1 2 3}}")[0].message,
        "helper `sub` takes 2 arguments, got 3"
    );
    let too_many = format!("{{{{format \"\"{}}}}}", " 1".repeat(17));
    assert_eq!(
        check_template(&too_many)[0].message,
        "helper `format` takes 1 to 17 arguments, got 18"
    );
    assert!(
        check_template("{{titel x}}")[0]
            .message
            .contains("did you mean `title`")
    );
    assert!(
        check_template("{{parseint x}}")[0]
            .message
            .contains("did you mean `parseInt`")
    );
}

#[test]
fn a_helper_name_alone_is_caught_at_load() {
    // `{{min}}` would call the helper, not read a field `min`: said at load, with the way to read the field.
    let problems = check_template("{{#each spec.ranges}}{{min}}-{{max}}{{/each}}");
    assert_eq!(
        problems[0].message,
        "`{{min}}` calls the helper `min` with no arguments; to read a field named `min`, write `{{this.min}}`"
    );
    assert_eq!(problems.len(), 2);
    let data = json!({"spec": {"ranges": [{"min": 1, "max": 3}]}});
    assert_eq!(
        render("{{#each spec.ranges}}{{this.min}}-{{this.max}}{{/each}}", data).unwrap(),
        "1-3"
    );
    assert_eq!(
        render("{{spec.keys}}", json!({"spec": {"keys": "k"}})).unwrap(),
        "k",
        "a path is a field"
    );
    assert!(
        check_template("{{#first l}}x{{/first}}")[0]
            .message
            .contains("not a block helper")
    );
}

/// The examples of the helper table in docs/rule-language.md, with literal arguments, give what it says.
#[test]
fn documented_examples_render_as_documented() {
    let data = json!({"metadata": {"name": "web"}});
    for (source, expected) in [
        ("{{add 1 2 3}}", "6"),
        ("{{add 1 0.5}}", "1.5"),
        ("{{div 7 2}} {{div 7.0 2}}", "3 3.5"),
        ("{{mod 7 3}} {{mod -7 3}}", "1 -1"),
        ("{{len \"héllo\"}}", "5"),
        ("{{#each (split \"a,b\" \",\")}}<{{this}}>{{/each}}", "<a><b>"),
        ("{{replace \"a.b.c\" \".\" \"-\"}}", "a-b-c"),
        ("{{trim \"  a b \\n\"}}", "a b"),
        (
            "{{substr \"kubernetes\" 0 4}} {{substr \"kubernetes\" 4}}",
            "kube rnetes",
        ),
        ("{{title \"hello wide-world\"}}", "Hello Wide-World"),
        ("{{format \"%s-%03d\" metadata.name 7}}", "web-007"),
        (
            "{{parseInt \"42\"}} {{parseInt \"ff\" 16}} {{parseFloat \"2.5\"}}",
            "42 255 2.5",
        ),
        ("{{sha1 \"abc\"}}", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("{{fnv64a \"a\"}}", "af63dc4c8601ec8c"),
        ("{{b64enc \"é\"}}", "w6k="),
        ("{{cidrSubnet \"10.0.0.0/16\" 8 2}}", "10.0.2.0/24"),
        (
            "{{cidrSubnet \"fd00:fd12:3456:7890::/56\" 16 162}}",
            "fd00:fd12:3456:7800:a200::/72",
        ),
    ] {
        assert_eq!(render(source, data.clone()).as_deref(), Ok(expected), "{source}");
    }
}

/// `first`, `last` and `index` are helpers; `#each`'s `@first`, `@last`, `@index` and paths such as
/// `../first` or `this.index` still read data.
#[test]
fn helper_names_leave_loop_variables_and_paths_alone() {
    let data = json!({"l": [{"first": "a", "index": 1}, {"first": "b", "index": 2}], "first": "top"});
    assert_eq!(
        render(
            "{{#each l}}{{#if @first}}F{{/if}}{{#if @last}}L{{/if}}{{@index}}{{this.first}}{{this.index}}{{../first}};{{/each}}",
            data
        )
        .unwrap(),
        "F0a1top;L1b2top;"
    );
}
