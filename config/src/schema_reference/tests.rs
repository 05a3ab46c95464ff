//! The rule reference generated from a schema: one section per kind, refs followed, enums and recursion.

use serde_json::json;

use super::*;

/// Two kinds (dispatched by `if`/`then`, refs into `definitions` and `$defs`), a recursive definition, an enum
/// with descriptions, lists of lists, maps and free-form objects.
fn tiny_schema() -> Value {
    json!({
        "title": "Tiny rule",
        "description": "A tiny rule language.",
        "allOf": [
            {
                "if": { "properties": { "kind": { "const": "Tree" } } },
                "then": { "$ref": "#/definitions/TreeRule" },
            },
            {
                "if": { "properties": { "kind": { "const": "Grid" } } },
                "then": { "$ref": "#/$defs/GridRule" },
            },
        ],
        "definitions": {
            "TreeRule": {
                "description": "A tree of nodes.",
                "type": "object",
                "required": ["kind", "spec"],
                "properties": {
                    "kind": { "const": "Tree", "type": "string", "description": "Always `Tree`." },
                    "spec": { "allOf": [{ "$ref": "#/definitions/Node" }], "description": "The root node." },
                },
            },
            "Node": {
                "description": "A node.",
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": { "type": "string", "pattern": "^[a-z]+$", "description": "Node name." },
                    "children": {
                        "type": "array",
                        "items": { "$ref": "#/definitions/Node" },
                        "description": "Subtrees.",
                    },
                    "colour": {
                        "anyOf": [{ "$ref": "#/definitions/Colour" }, { "type": "null" }],
                        "default": "red",
                        "description": "Colour.",
                    },
                },
            },
            "Colour": {
                "description": "Colours.",
                "oneOf": [
                    { "const": "red", "type": "string", "description": "Warm." },
                    { "const": "blue", "type": "string", "description": "Cold." },
                ],
            },
        },
        "$defs": {
            "GridRule": {
                "title": "Grid",
                "type": "object",
                "properties": {
                    "cells": {
                        "type": ["array", "null"],
                        "minItems": 1,
                        "description": "Rows of cells.",
                        "items": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "description": "One cell.",
                                "required": ["x"],
                                "properties": {
                                    "x": {
                                        "type": "integer",
                                        "format": "int32",
                                        "minimum": 0,
                                        "maximum": 9,
                                        "description": "Cell value, a | b\nwrapped.\n\nSecond paragraph.",
                                    },
                                },
                            },
                        },
                    },
                    "labels": {
                        "type": "object",
                        "additionalProperties": { "type": "string", "enum": ["on", "off"] },
                        "description": "Labels.",
                    },
                    "extra": { "type": "object", "additionalProperties": true },
                    "filters": {
                        "type": "array",
                        "items": {
                            "anyOf": [
                                { "type": "string", "description": "A name." },
                                {
                                    "type": "object",
                                    "description": "A declared filter.",
                                    "properties": { "expr": { "type": "string", "description": "Expression." } },
                                },
                            ],
                        },
                    },
                },
            },
        },
    })
}

/// The lines of the section under `heading`, up to the next heading.
fn section(markdown: &str, heading: &str) -> Vec<String> {
    let start = markdown
        .lines()
        .position(|line| line == heading)
        .unwrap_or_else(|| panic!("no heading {heading:?} in\n{markdown}"));
    markdown
        .lines()
        .skip(start + 1)
        .take_while(|line| !line.starts_with('#'))
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn one_section_per_kind_in_schema_order() {
    let markdown = rule_reference_markdown(&tiny_schema());
    assert!(
        markdown.starts_with("# Tiny rule reference\n\n> Generated from"),
        "{markdown}"
    );
    assert!(markdown.contains("UPDATE_GOLDEN=1 cargo test -p ruleplane-config --test rules schema_file::"));
    let kinds: Vec<&str> = markdown.lines().filter(|line| line.starts_with("## ")).collect();
    assert_eq!(kinds, ["## Tree", "## Grid", "## `Node`"]);
    assert!(markdown.contains("- [Tree](#tree)\n- [Grid](#grid)\n- [`Node` (recursive type)](#node)\n"));
    assert_eq!(
        section(&markdown, "## Tree"),
        [
            "A tree of nodes.",
            "| field | type | required | default | allowed values | description |",
            "| --- | --- | --- | --- | --- | --- |",
            "| `kind` | string | yes |  | `Tree` | Always `Tree`. |",
            "| `spec` | [object](#tree-spec) | yes |  |  | The root node. |",
        ]
    );
}

#[test]
fn refs_are_followed_fields_sorted_and_enums_listed_with_their_descriptions() {
    let markdown = rule_reference_markdown(&tiny_schema());
    assert_eq!(
        section(&markdown, "### Tree `spec`"),
        [
            "A node.",
            "| field | type | required | default | allowed values | description |",
            "| --- | --- | --- | --- | --- | --- |",
            "| `spec.children` | list of [`Node`](#node) | no |  |  | Subtrees. |",
            "| `spec.colour` | string | no | `red` | `red`, `blue` | Colour.<br>`red`: Warm.<br>`blue`: Cold. |",
            "| `spec.name` | string | yes |  | pattern `^[a-z]+$` | Node name. |",
        ]
    );
}

#[test]
fn a_recursive_definition_is_listed_once_and_links_to_itself() {
    let markdown = rule_reference_markdown(&tiny_schema());
    let node = section(&markdown, "## `Node`");
    assert_eq!(node[0], RECURSIVE_NOTE);
    assert_eq!(node[1], "A node.");
    assert!(node.contains(&"| `children` | list of [`Node`](#node) | no |  |  | Subtrees. |".to_owned()));
    assert_eq!(markdown.matches("## `Node`").count(), 1);
}

#[test]
fn nested_lists_maps_and_variants() {
    let markdown = rule_reference_markdown(&tiny_schema());
    let grid = section(&markdown, "## Grid");
    assert_eq!(
        grid[2..],
        [
            "| `cells` | list of list of [object](#grid-cells) | no |  | at least 1 item | Rows of cells. |",
            "| `extra` | object (any fields) | no |  |  |  |",
            "| `filters` | list of (string or [object](#grid-filters)) | no |  |  | As a string: A name.<br>As an \
             object: A declared filter. |",
            "| `labels` | map of string | no |  | `on`, `off` | Labels. |",
        ]
    );
    assert_eq!(
        section(&markdown, "### Grid `cells[][]`")[..2],
        [
            "One cell.",
            "| field | type | required | default | allowed values | description |",
        ]
    );
    assert!(markdown.contains(
        "| `cells[][].x` | integer (int32) | yes |  | 0 to 9 | Cell value, a \\| b wrapped.<br><br>Second \
         paragraph. |"
    ));
    assert!(markdown.contains("| `filters[].expr` | string | no |  |  | Expression. |"));
    assert_eq!(
        prose("a <key, value> pair, `x.<name>`"),
        "a &lt;key, value> pair, `x.<name>`"
    );
}

/// Every `(#anchor)` names a heading as GitHub anchors it, in the tiny schema and in the real one.
#[test]
fn every_link_reaches_a_heading() {
    for schema in [tiny_schema(), crate::rule_language_schema()] {
        let markdown = rule_reference_markdown(&schema);
        let mut slugs = Slugger::default();
        let anchors: Vec<String> = markdown
            .lines()
            .filter(|line| line.starts_with('#'))
            .map(|line| slugs.slug(line))
            .collect();
        let links: Vec<&str> = markdown
            .split("](#")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
            .collect();
        assert!(!links.is_empty());
        for link in links {
            assert!(anchors.iter().any(|anchor| anchor == link), "no heading for #{link}");
        }
    }
}

#[test]
fn repeated_headings_are_numbered_like_github() {
    let mut slugs = Slugger::default();
    let made: Vec<String> = ["## A `b.c`", "## A `bc`", "## a-bc"]
        .iter()
        .map(|h| slugs.slug(h))
        .collect();
    assert_eq!(made, ["a-bc", "a-bc-1", "a-bc-2"]);
}
