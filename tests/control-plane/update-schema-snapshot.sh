#!/usr/bin/env bash
# Rewrites config/schemas/kubernetes-<minor>.json — the schemas of the built-in kinds Ruleplane checks rendered
# children against offline (`--kubernetes-version`) — from the /openapi/v3 of the project's own kube-apiserver of
# that version, through the integration test that otherwise fails when the snapshot is stale. Review the diff and
# commit it.
#   update-schema-snapshot.sh            every supported version (each plane built once; see versions.sh)
#   K8S_VERSION=1.36 update-schema-snapshot.sh   one
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=versions.sh
. tests/control-plane/versions.sh
if [ -n "${K8S_VERSION:-}" ]; then versions=$k8s_version; else versions=$(k8s_supported); fi
for version in $versions; do
  K8S_VERSION=$version RULEPLANE_UPDATE_SCHEMA_SNAPSHOT=1 cargo test -p ruleplane --test integration -- \
    openapi_snapshot::the_builtin_schema_snapshot_is_the_apiservers --exact
done
git diff --stat -- config/schemas/
