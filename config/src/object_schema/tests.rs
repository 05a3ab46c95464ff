//! The schema checks on synthetic objects and on the committed snapshot.

use serde_json::json;

use super::*;

fn problems(object: Value) -> Vec<String> {
    KindSchemas::default()
        .check(&object)
        .expect("a known kind")
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
           "spec": spec})
}

fn pod_template(container: Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container]}})
}

#[test]
fn each_versions_snapshot_is_json_of_that_version_and_knows_every_builtin_kind() {
    for version in KubernetesVersion::ALL {
        let snapshot: Value = serde_json::from_str(builtin_snapshot_text(version)).expect("JSON");
        let written = snapshot["kubernetesVersion"].as_str().expect("a version");
        assert!(written.starts_with(&format!("v{version}.")), "{version}: {written}");
        for kind in crate::BUILTIN_KINDS {
            assert!(
                KindSchemas::for_version(version).knows(kind.api_version, kind.kind),
                "{version}: {} {}",
                kind.api_version,
                kind.kind
            );
        }
    }
}

#[test]
fn a_valid_deployment_has_no_problems() {
    let valid = deployment(json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": pod_template(json!({"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
            "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}],
            "resources": {"limits": {"cpu": "500m", "memory": 1073741824u64}}}))
    }));
    assert_eq!(problems(valid), Vec::<String>::new());
}

#[test]
fn unknown_fields_types_required_enums_and_quantities_are_reported_with_their_paths() {
    let broken = deployment(json!({
        "replica": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": pod_template(json!({"image": "nginx", "imagePullPolicy": "Sometimes",
            "ports": [{"containerPort": "80"}], "env": [{"name": "PORT", "value": 8080}],
            "resources": {"limits": {"cpu": "lots"}}}))
    }));
    assert_eq!(
        problems(broken),
        [
            "spec.replica: field not declared in schema",
            "spec.template.spec.containers[0].env[0].value: expected a string, got an integer (8080)",
            "spec.template.spec.containers[0].imagePullPolicy: \"Sometimes\" is not one of \"Always\", \"IfNotPresent\", \"Never\"",
            "spec.template.spec.containers[0].ports[0].containerPort: expected an integer, got a string (\"80\")",
            "spec.template.spec.containers[0].resources.limits.cpu: invalid quantity `lots`: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            "spec.template.spec.containers[0].name: required field is missing",
        ]
    );
}

#[test]
fn integer_formats_bytes_and_nulls() {
    let too_big = deployment(
        json!({"replicas": 3_000_000_000u64, "selector": {}, "template": pod_template(json!({"name": "a"}))}),
    );
    assert_eq!(
        problems(too_big),
        ["spec.replicas: 3000000000 is out of range for int32"]
    );
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                        "data": {"ok": "aGk=", "bad": "not base64!"}, "stringData": {"text": "anything"}});
    assert_eq!(
        problems(secret),
        ["data.bad: expected base64-encoded bytes (a Secret's `data`; `stringData` takes text)"]
    );
    let nulls = deployment(
        json!({"replicas": null, "selector": {}, "template": pod_template(json!({"name": "a", "image": null}))}),
    );
    assert_eq!(problems(nulls), Vec::<String>::new(), "null leaves a field out");
}

#[test]
fn custom_resources_follow_their_crd_schema_and_metadata_is_object_meta() {
    let mut schemas = KindSchemas::default();
    schemas.add_custom(
        "example.com/v1",
        "Certificate",
        &json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["secretName"], "properties": {
                "secretName": {"type": "string", "maxLength": 12, "pattern": "^[a-z-]+$"},
                "duration": {"type": "string", "x-kubernetes-int-or-string": true},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 5},
                "usages": {"type": "array", "maxItems": 1, "items": {"type": "string", "enum": ["server auth", "client auth"]}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            "status": {"type": "object"}}}),
    );
    let check = |object: Value| -> Vec<String> {
        schemas
            .check(&object)
            .expect("known")
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    let certificate = |spec: Value| json!({"apiVersion": "example.com/v1", "kind": "Certificate", "metadata": {"name": "c", "labelz": {}}, "spec": spec});
    assert_eq!(
        check(certificate(
            json!({"secretName": "Not_Valid_And_Long", "duration": 5, "replicas": 9,
                                 "usages": ["server auth", "signing"], "extra": {"anything": [1]}, "typo": true})
        )),
        [
            "metadata.labelz: field not declared in schema",
            "spec.replicas: 9 is above the maximum 5",
            "spec.secretName: may be at most 12 character(s) long, is 18",
            "spec.secretName: \"Not_Valid_And_Long\" does not match the pattern \"^[a-z-]+$\"",
            "spec.typo: field not declared in schema",
            "spec.usages: may have at most 1 item(s), has 2",
            "spec.usages[1]: \"signing\" is not one of \"server auth\", \"client auth\"",
        ]
    );
    let mut minimal = certificate(json!({}));
    minimal["metadata"] = json!({"name": "c"});
    assert_eq!(check(minimal), ["spec.secretName: required field is missing"]);
    assert!(
        KindSchemas::default().check(&certificate(json!({}))).is_none(),
        "unknown kind: no verdict"
    );
}

#[test]
fn the_schemas_of_crd_manifests_given_with_crds_check_children_of_their_kinds() {
    let manifest = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
        metadata: { name: certificates.certs.example.org }\n\
        spec:\n  group: certs.example.org\n  scope: Namespaced\n  names: { kind: Certificate, plural: certificates }\n  \
        versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n          \
        type: object\n          properties:\n            spec:\n              type: object\n              \
        required: [secretName]\n              properties: { secretName: { type: string } }\n";
    let installed =
        crate::installed_kinds::load_crd_texts(&[("crds.yaml".into(), manifest.into())]).expect("valid manifest");
    let rules = "apiVersion: ruleplane.dev/v1alpha1\nkind: Reconciler\nmetadata: { name: tls }\nspec:\n  \
        for: { apiVersion: v1, kind: Service }\n  children:\n    - id: certificate\n      template: |\n        \
        apiVersion: certs.example.org/v1\n        kind: Certificate\n        metadata: { name: \"{{metadata.name}}\" }\n        \
        spec: { secretNam: x }\n";
    let options = crate::LoadOptions {
        installed,
        ..Default::default()
    };
    let rules = crate::load_str_with("rules.yaml", rules, &options).unwrap_or_else(|d| panic!("{d}"));
    let schemas = KindSchemas::of_rule_set(&rules);
    assert!(schemas.knows("certs.example.org/v1", "Certificate"));
    let found: Vec<String> = crate::synthetic_parent_diagnostics(&rules, &schemas)
        .iter()
        .map(|d| format!("{}:{} {}", d.line, d.column, d.message))
        .collect();
    assert_eq!(
        found,
        [
            "12:17 child `certificate` (certs.example.org/v1 Certificate example): spec.secretNam: field not declared \
             in schema (the apiserver would reject this apply)",
            "12:9 child `certificate` (certs.example.org/v1 Certificate example): spec.secretName: required field is \
             missing (the apiserver would reject this apply)",
        ]
    );
}

#[test]
fn a_field_of_another_supported_version_is_named_with_the_version_that_serves_it() {
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
        "spec": {"scheduling": {}, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let on = |version: KubernetesVersion, object: &Value| -> Vec<String> {
        let problems = KindSchemas::for_version(version).check(object).expect("a known kind");
        problems.iter().map(ToString::to_string).collect()
    };
    assert_eq!(on(KubernetesVersion::V1_37, &job), Vec::<String>::new());
    assert_eq!(
        on(KubernetesVersion::V1_36, &job),
        [
            "spec.scheduling: field not declared in schema: served from Kubernetes 1.37; checking against 1.36 \
          (--kubernetes-version)"
        ]
    );
    let pod = |spec: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec});
    let grouped = pod(json!({"containers": [{"name": "c"}], "schedulingGroup": {"podGroupName": "g"}}));
    assert_eq!(on(KubernetesVersion::V1_36, &grouped), Vec::<String>::new());
    assert_eq!(
        on(KubernetesVersion::V1_35, &grouped),
        [
            "spec.schedulingGroup: field not declared in schema: served from Kubernetes 1.36; checking against 1.35 \
          (--kubernetes-version)"
        ]
    );
    let referenced = pod(json!({"containers": [{"name": "c"}], "workloadRef": {"name": "w", "podGroup": "g"}}));
    assert_eq!(on(KubernetesVersion::V1_35, &referenced), Vec::<String>::new());
    assert_eq!(
        on(KubernetesVersion::V1_37, &referenced),
        [
            "spec.workloadRef: field not declared in schema: served until Kubernetes 1.35; checking against 1.37 \
          (--kubernetes-version)"
        ]
    );
    // A field no supported version has stays a plain problem.
    let typo = pod(json!({"containers": [{"name": "c"}], "nodeNme": "n"}));
    assert_eq!(
        on(KubernetesVersion::V1_37, &typo),
        ["spec.nodeNme: field not declared in schema"]
    );
}

/// The built-in objects with empty enum values the apiserver defaults (also applied to the plane by the
/// integration tests).
const DEFAULTED_EMPTY: &str = include_str!("testdata/defaulted-empty.yaml");

#[test]
fn an_empty_enum_value_of_a_built_in_kind_is_left_to_the_apiservers_defaulting() {
    let documents = crate::yaml_tree::parse_json_documents(DEFAULTED_EMPTY).expect("YAML");
    assert_eq!(documents.len(), 5);
    for object in documents {
        assert_eq!(problems(object.clone()), Vec::<String>::new(), "{object}");
    }
    // Defaulted only when absent (a pointer in Go): empty is refused, by the apiserver too.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
        "spec": {"completionMode": "", "template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}]}}}});
    assert_eq!(problems(job).len(), 1);
    // Another value not in the enum is still refused, and a custom kind's enum is the apiserver's schema.
    let refused = deployment(json!({"selector": {"matchLabels": {"app": "web"}},
        "template": pod_template(json!({"name": "web", "image": "nginx", "imagePullPolicy": "Sometimes"}))}));
    assert_eq!(problems(refused).len(), 1);
    let mut schemas = KindSchemas::default();
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "mode": {"type": "string", "enum": ["A", "B"]}}}}});
    schemas.add_custom("example.com/v1", "Thing", &schema);
    let thing = json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"},
                       "spec": {"mode": ""}});
    assert_eq!(
        schemas.check(&thing).expect("known").len(),
        1,
        "a CRD's enum refuses \"\""
    );
}
