#!/usr/bin/env bash
# Many Reconciler rules on one kind, on the local control plane; prints figures (no pass/fail). RULES rules on
# ConfigMaps, each selecting its own label value and rendering one ConfigMap child per parent (PARENTS per rule),
# next to OTHER ConfigMaps labelled as Ruleplane children of a rule not loaded (what a busy cluster's shared
# watch of children holds). For each binary: start → ready, start → every child exists, then the manager's
# TCP connections, threads, RSS, CPU, requests it sent, and its runtime lag (how late a task due every 100 ms woke).
# Usage: tests/bench/many_rules.sh [RULES] [PARENTS]   (defaults 200 5; OTHER defaults to 10000)
#   RULEPLANE_BIN: the binary (default the release build); BASELINE_BIN: a second binary run the same way first,
#   for a side-by-side run.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
rules=${1:-200}
parents=${2:-5}
other=${OTHER:-10000}
bin=${RULEPLANE_BIN:-$target/release/ruleplane}
[ -x "$bin" ] || { echo "build first: cargo build --release -p ruleplane ($bin missing)"; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
requests() { kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ {s+=$NF} END {printf "%d", s}'; }
request_counts() { # file ← apiserver_request_total by verb, resource, subresource and code
  kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ {
    key = ""; sub(/^[^{]*\{/, "", $1); n = split($1, parts, ",")
    for (i = 1; i <= n; i++) if (parts[i] ~ /^(code|resource|subresource|verb)=/) key = key " " parts[i]
    s[key] += $NF } END { for (k in s) print k "\t" s[k] }' | sort >"$1"
}
request_delta() { # before after → the request kinds sent in between, most first
  join -t "$(printf '\t')" -a 2 -e 0 -o 0,1.2,2.2 "$1" "$2" | awk -F '\t' '$3 - $2 > 0 {printf "%8d %s\n", $3 - $2, $1}' |
    sort -rn | head -8
}
count() { # namespace selector → ConfigMaps matching it (remainingItemCount is not served with a selector)
  kubectl get --raw "/api/v1/namespaces/$1/configmaps?labelSelector=$2" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))'
}

echo "machine: $(nproc) cores; $rules rules × $parents parents, $other other labelled children cached"
# The other children: kept between runs (creating them takes a while); ConfigMaps of a rule that is not loaded.
bg=bench-many-rules-other
kubectl create namespace "$bg" >/dev/null 2>&1 || true
have=$(count "$bg" "ruleplane.dev%2Frule%3Dnot-loaded")
if [ "$have" -lt "$other" ]; then
  for i in $(seq "$have" $((other - 1))); do
    printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other-%d\n  labels: { app.kubernetes.io/managed-by: ruleplane, ruleplane.dev/rule: not-loaded, ruleplane.dev/parent-uid: u-%d }\n' "$i" "$i"
  done >"$work/other.yaml"
  kubectl create -n "$bg" -f "$work/other.yaml" >/dev/null 2>&1 || true # names left by an interrupted run exist already
  have=$(count "$bg" "ruleplane.dev%2Frule%3Dnot-loaded")
  [ "$have" -ge "$other" ] || { echo "only $have of $other other children could be created"; exit 1; }
fi

run() { # label binary
  local label=$1 binary=$2 ns="bench-rules-$$-$1"
  kubectl create namespace "$ns" >/dev/null
  mkdir -p "$work/$label"
  for r in $(seq 1 "$rules"); do
    cat >>"$work/$label/rules.yaml" <<YAML
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: rule-$r }
spec:
  for: { apiVersion: v1, kind: ConfigMap, namespace: $ns, selector: { matchLabels: { bench-rule: "r$r" } } }
  children:
    - id: copy
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-copy" }
        data: { from: {{json metadata.name}} }
YAML
    for p in $(seq 1 "$parents"); do
      printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata: { name: r%d-p%d, labels: { bench-rule: "r%d" } }\ndata: { index: "%d" }\n' "$r" "$p" "$r" "$p"
    done >>"$work/$label-parents.yaml"
  done
  kubectl create -n "$ns" -f "$work/$label-parents.yaml" >/dev/null
  local mport hport before t0 ready converged
  mport=$(free_port); hport=$(free_port)
  before=$(requests); request_counts "$work/$label-before.txt"
  t0=$(now)
  "$binary" run --rules "$work/$label" --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --leader-election-namespace "$ns" --identity "$label" \
    --metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$hport" >"$work/$label.log" 2>&1 &
  local mpid=$!; pids+=("$mpid")
  until curl -fs "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1; do sleep 0.05; done
  ready=$(since "$t0")
  local polls=0
  until [ "$(count "$ns" "ruleplane.dev%2Frule")" -ge $((rules * parents)) ]; do polls=$((polls + 1)); sleep 0.2; done
  converged=$(since "$t0")
  sleep 5 # the watches' first resyncs and the connection pool settle
  local connections threads rss peak cpu sent
  connections=$(ss -tnpH state established 2>/dev/null | grep -c "pid=$mpid," || true)
  threads=$(awk '/^Threads/{print $2}' "/proc/$mpid/status")
  rss=$(awk '/VmRSS/{printf "%.1f", $2/1024}' "/proc/$mpid/status")
  peak=$(awk '/VmHWM/{printf "%.1f", $2/1024}' "/proc/$mpid/status")
  cpu=$(proc_cpu "$mpid")
  sent=$(( $(requests) - before - polls - 2 )) # less this script's own requests
  local resyncs
  resyncs=$(curl -fs "http://127.0.0.1:$mport/metrics" | awk '/^ruleplane_watch_resyncs_total/ {s+=$NF} END {print s+0}')
  request_counts "$work/$label-after.txt"
  echo "$label: ready after $ready s, every child after $converged s; $connections TCP connections, $threads threads, RSS $rss MiB (peak $peak), CPU $cpu s, $sent API requests, $resyncs lagging subscribers resynced; $(lag "$mport")"
  echo "$label: requests by kind (the script's own polls included):"
  request_delta "$work/$label-before.txt" "$work/$label-after.txt" | sed "s/^/  /"
  kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true
  kubectl delete namespace "$ns" --wait=false >/dev/null
}

if [ -n "${BASELINE_BIN:-}" ]; then run baseline "$BASELINE_BIN"; fi
run ruleplane "$bin"
