#!/usr/bin/env bash
# A hostile tenant floods its namespace with ConfigMaps carrying Ruleplane's child labels and one real parent's UID,
# annotated as children of that very parent, in its namespace, with a child id the rule has: everything but the
# signature. Prints the manager's RSS before and after, what its shared child watch holds and refused,
# whether any forged object was deleted and whether the real child is intact.
# Figures only, no pass/fail on memory.
# Usage: tests/bench/tenant_flood.sh [OBJECTS] [BYTES]   (defaults 10000 1024: data bytes per forged object)
#   RULEPLANE_BIN: the binary (default the release build, else the debug build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
objects=${1:-10000}
bytes=${2:-1024}
bin=${RULEPLANE_BIN:-$target/release/ruleplane}
[ -x "$bin" ] || bin=$target/debug/ruleplane
[ -x "$bin" ] || { echo "build first: cargo build -p ruleplane"; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
ns=bench-tenant-$$
kubectl create namespace "$ns" >/dev/null
namespaces+=("$ns")
metrics=$(free_port); health=$(free_port)
start_manager() {
  "$bin" run --rules "$root/examples/team-card.yaml" --kubeconfig "$KUBECONFIG" --leader-election-namespace "$ns" \
    --metrics-bind-address "127.0.0.1:$metrics" --health-probe-bind-address "127.0.0.1:$health" >>"$work/manager.log" 2>&1 &
  manager=$!
  pids+=("$manager")
  for _ in $(seq 1 300); do curl -fs "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  kill -0 "$manager" 2>/dev/null || { echo "the manager exited:"; tail -20 "$work/manager.log"; exit 1; }
}
start_manager
echo "binary: $bin; $objects forged objects of $bytes data bytes each"
kubectl -n "$ns" create configmap real --from-literal=team=platform >/dev/null
kubectl -n "$ns" label configmap real example.ruleplane.dev/team-card=yes >/dev/null
for _ in $(seq 1 100); do kubectl -n "$ns" get configmap real-card >/dev/null 2>&1 && break; sleep 0.2; done
uid=$(kubectl -n "$ns" get configmap real -o jsonpath='{.metadata.uid}')
sleep 3
before=$(rss "$manager")
echo "RSS with one real parent and its card: $before MiB"
payload=$(head -c "$bytes" /dev/zero | tr '\0' x)
python3 - "$objects" "$ns" "$uid" "$payload" >"$work/flood.yaml" <<'PY'
import json, sys
objects, ns, uid, payload = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
for i in range(objects):
    print(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": f"forged-{i}", "namespace": ns,
        "labels": {"app.kubernetes.io/managed-by": "ruleplane", "ruleplane.dev/rule": "team-card",
                   "ruleplane.dev/parent-uid": uid, "ruleplane.dev/child-id": "card"},
        "annotations": {"ruleplane.dev/parent": f"{ns}/real"}}, "data": {"filler": payload}}))
PY
started=$(now)
split -l 1000 "$work/flood.yaml" "$work/flood-part-"
for part in "$work"/flood-part-*; do kubectl create -f "$part" >/dev/null; done
echo "created $objects forged objects in $(since "$started") s"
# The real parent reconciles once more (a change), meeting every forged object in its index.
kubectl -n "$ns" label configmap real touched=yes >/dev/null
sleep 10
after=$(rss "$manager")
watched=$(curl -fs "http://127.0.0.1:$metrics/metrics" | awk '/^ruleplane_watch_objects\{/ && /managed-by/ && /content="objects"/ {s += $NF} END {print s + 0}')
refused=$(curl -fs "http://127.0.0.1:$metrics/metrics" | awk '/^ruleplane_watch_unproven_objects_total\{/ && /ConfigMap/ {s += $NF} END {print s + 0}')
left=$(kubectl -n "$ns" get configmaps -l ruleplane.dev/rule=team-card -o name | grep -c forged- || true)
card=$(kubectl -n "$ns" get configmap real-card -o jsonpath='{.data.team}')
echo "RSS after the flood: $after MiB (+$(awk "BEGIN{printf \"%.1f\", $after - $before}") MiB); child watch holds $watched objects, refused $refused events of unsigned look-alikes"
echo "forged objects still there: $left of $objects; the real card says team=$card"
# A manager that starts among the forged objects meets them all in its first list (paged by the watcher).
kill "$manager"; wait "$manager" 2>/dev/null || true
start_manager
sleep 5
echo "RSS of a manager started after the flood: $(rss "$manager") MiB (the first one before it: $before MiB)"
