#!/usr/bin/env bash
# Rewrites config/schemas/kubernetes.json — the schemas of the built-in kinds Ruleplane checks rendered children
# against offline — from the /openapi/v3 of the project's own kube-apiserver (tests/control-plane/K8S_VERSION),
# through the integration test that otherwise fails when the snapshot is stale. Review the diff and commit it.
set -euo pipefail
cd "$(dirname "$0")/../.."
RULEPLANE_UPDATE_SCHEMA_SNAPSHOT=1 cargo test -p ruleplane --test integration -- \
  openapi_snapshot::the_builtin_schema_snapshot_is_the_apiservers --exact
git diff --stat -- config/schemas/kubernetes.json
