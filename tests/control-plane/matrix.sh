#!/usr/bin/env bash
# The version matrix: the integration tests whose behaviour depends on the Kubernetes version, on each supported
# version's plane (each built once, side by side; docs/compatibility.md). `make test` runs everything on the
# default (newest) version; this runs the version-dependent modules on the others (or on those given).
#   matrix.sh                 every supported version but the default
#   matrix.sh 1.35 1.37       these
# Prints a table (module × version: pass/fail) and exits 1 if any failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
# shellcheck source=versions.sh
. "$here/versions.sh"
default=$(k8s_resolve "$(cat "$here/K8S_VERSION")")
if [ $# -gt 0 ]; then
  versions=$(for v in "$@"; do k8s_resolve "$v"; done)
else
  versions=$(k8s_supported | grep -vx "$default")
fi
# What differs by version: built-in schemas, CRD registration and evolution, the Reconciler basics, kube-scheduler's
# rules (fidelity against that version's kube-scheduler), gangs in both dialects, volumes.
modules=(openapi_snapshot:: resource_definitions:: reconcilers:: schedulers:: scheduler_preemption:: scheduler_fidelity::
         preemption_fidelity:: preemption_corpus:: gangs:: gang_checks:: gang_corpus:: gang_late_kinds:: scheduler_volumes::
         volume_corpus::)
cargo test -p ruleplane --test integration --no-run >/dev/null
declare -A result
failed=0
for version in $versions; do
  K8S_VERSION=$version tests/control-plane/build.sh >/dev/null
  for module in "${modules[@]}"; do
    log="${TMPDIR:-/tmp}/ruleplane-matrix-$version-${module%::}.log"
    start=$SECONDS
    if K8S_VERSION=$version cargo test -p ruleplane --test integration -- "$module" >"$log" 2>&1; then
      result[$version,$module]="pass ($(grep -oE '[0-9]+ passed' "$log" | tail -1), $((SECONDS - start)) s)"
    else
      result[$version,$module]="FAIL (log: $log)"; failed=1
    fi
    printf '%-8s %-22s %s\n' "$version" "${module%::}" "${result[$version,$module]}" >&2
  done
done
printf '\n| test module |'; for version in $versions; do printf ' %s |' "$version"; done; printf '\n|---|'
for _ in $versions; do printf -- '---|'; done; printf '\n'
for module in "${modules[@]}"; do
  printf '| `%s` |' "${module%::}"
  for version in $versions; do printf ' %s |' "${result[$version,$module]}"; done; printf '\n'
done
exit $failed
