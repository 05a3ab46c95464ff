#!/usr/bin/env bash
# Collections benchmark on the local control plane; prints figures (no pass/fail). In one run, same machine:
#   1. Ruleplane, the two-child workload of tests/bench/reconciler.sh (a ConfigMap and a Deployment per parent);
#   2. Ruleplane, each parent listing ITEMS names and getting one ConfigMap per item (`forEach`);
#   3. KRO v0.9.4 (built from its Go module into the cache, as reconciler.sh does) with the same `forEach`
#      workload as a ResourceGraphDefinition, at its defaults and at Ruleplane's concurrency (skipped with KRO=0).
# Each contender: parents created while it is down, then timed from its start until every child exists;
# parents/s, children/s, peak RSS, CPU of the contender, kube-apiserver and etcd.
# Usage: tests/bench/collections.sh [PARENTS] [ITEMS] [CONCURRENCY]   (release build: cargo build --release -p ruleplane)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
parents=${1:-1000}
items=${2:-10}
concurrency=${3:-16}
bin=${RULEPLANE_BIN:-$target/release/ruleplane}
[ -x "$bin" ] || { echo "build first: cargo build --release -p ruleplane ($bin missing)"; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
apiserver_pid=$(cat "$cache/cluster/kube-apiserver.pid"); etcd_pid=$(cat "$cache/cluster/etcd.pid")

# Objects of a resource in a namespace, from one page of one object (remainingItemCount: no list of them all).
count() { # group-path resource namespace
  kubectl get --raw "/$1/namespaces/$3/$2?limit=1" 2>/dev/null | python3 -c '
import json, sys
page = json.load(sys.stdin)
print(len(page["items"]) + page["metadata"].get("remainingItemCount", 0))' 2>/dev/null || echo 0
}
run_namespace() { local ns=$1; kubectl create namespace "$ns" >/dev/null; namespaces+=("$ns"); }
# Until the namespace holds that many ConfigMaps (and Deployments, when asked) besides kube-root-ca.crt (published
# there when the plane runs that controller).
wait_for() { # namespace configmaps [deployments]
  local extra
  until extra=$(kubectl get configmap kube-root-ca.crt -n "$1" -o name 2>/dev/null | wc -l)
    [ "$(count api/v1 configmaps "$1")" -ge $(($2 + extra)) ]; do sleep 0.5; done
  [ -z "${3:-}" ] || until [ "$(count apis/apps/v1 deployments "$1")" -ge "$3" ]; do sleep 0.5; done
}
item_list=$(seq -s, -f '"i%g"' 0 $((items - 1)))
cpu_figures() { # pid apiserver-before etcd-before
  printf 'CPU: %.2f s, kube-apiserver %.2f s, etcd %.2f s' "$(proc_cpu "$1")" \
    "$(awk "BEGIN{print $(proc_cpu "$apiserver_pid") - $2}")" "$(awk "BEGIN{print $(proc_cpu "$etcd_pid") - $3}")"
}
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $parents parents, $items items each, concurrency $concurrency"

# --- Ruleplane: two children per parent, then a collection of ITEMS per parent ------------------------------
ns2="bench-rp-two-$$"; run_namespace "$ns2"
nsc="bench-rp-items-$$"; run_namespace "$nsc"
mkdir -p "$work/rules"
{ bench_app_rules "$ns2" "$concurrency"; cat <<YAML
---
apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: bench-list.bench.ruleplane.dev }
spec:
  versions: [ { name: v1, subresources: { status: {} } } ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: bench-items }
spec:
  for: { apiVersion: bench.ruleplane.dev/v1, kind: BenchList, namespace: $nsc }
  concurrency: $concurrency
  children:
    - id: configs
      forEach:
        - entry: '{.spec.items}'
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-{{entry}}", labels: { app: {{json metadata.name}} } }
        data: { entry: {{json entry}}, image: {{json spec.image}} }
YAML
} >"$work/rules/bench.yaml"
start_manager() { # id → sets $mpid
  local mport; mport=$(free_port); local hport; hport=$(free_port)
  "$bin" run --rules "$work/rules" --kubeconfig "$KUBECONFIG" --leader-election-namespace "$ns2" --identity "$1" \
    --leader-elect=false --metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$hport" \
    >"$work/$1.log" 2>&1 &
  mpid=$!; pids+=("$mpid")
  until curl -fs "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1; do sleep 0.05; done
}
# The CRDs first (a manager registers them), then the parents of both rules, then one timed manager per workload
# (both rules load, the other rule's parents are converged already, so its work is the no-op resync).
start_manager register
for crd in benchapps benchlists; do
  until kubectl get crd "$crd.bench.ruleplane.dev" >/dev/null 2>&1; do sleep 0.2; done
  kubectl wait --for=condition=Established "crd/$crd.bench.ruleplane.dev" --timeout=60s >/dev/null
done
kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true
create_parents "$work/two.yaml" bench.ruleplane.dev/v1 BenchApp "$ns2" "$parents" '{ image: "nginx:1.27" }'
a0=$(proc_cpu "$apiserver_pid"); e0=$(proc_cpu "$etcd_pid"); t0=$(now)
start_manager two
wait_for "$ns2" "$parents" "$parents"
took=$(since "$t0")
rp_two_rate=$(awk "BEGIN{print $parents/$took}")
printf 'ruleplane, 2 children per parent: %d parents in %s s = %.0f parents/s (%.0f children/s); peak RSS %.1f MiB; %s\n' \
  "$parents" "$took" "$rp_two_rate" "$(awk "BEGIN{print 2*$parents/$took}")" \
  "$(awk '/VmHWM/{print $2/1024}' "/proc/$mpid/status")" "$(cpu_figures "$mpid" "$a0" "$e0")"
kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true

create_parents "$work/items.yaml" bench.ruleplane.dev/v1 BenchList "$nsc" "$parents" "{ image: \"nginx:1.27\", items: [$item_list] }"
a0=$(proc_cpu "$apiserver_pid"); e0=$(proc_cpu "$etcd_pid"); t0=$(now)
start_manager items
wait_for "$nsc" $((parents * items))
took=$(since "$t0")
rp_rate=$(awk "BEGIN{print $parents/$took}")
peak=$(awk '/VmHWM/{print $2/1024}' "/proc/$mpid/status"); cpu=$(cpu_figures "$mpid" "$a0" "$e0")
sleep 10 # the statuses and Events written after the children, then the RSS with everything cached
printf 'ruleplane, forEach over %d items: %d parents in %s s = %.0f parents/s (%.0f children/s); peak RSS %.1f MiB, %.1f MiB 10 s later; %s\n' \
  "$items" "$parents" "$took" "$rp_rate" "$(awk "BEGIN{print $items*$parents/$took}")" "$peak" \
  "$(awk '/VmRSS/{print $2/1024}' "/proc/$mpid/status")" "$cpu"
kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true

# --- KRO v0.9.4, the same forEach workload -------------------------------------------------------------------
[ "${KRO:-1}" = 0 ] && exit 0
kro_version=v0.9.4
kro_dir="$cache/kro/$kro_version"
if [ ! -x "$kro_dir/controller" ]; then
  echo "building KRO $kro_version from its Go module into $kro_dir (bench only)..."
  mkdir -p "$kro_dir"
  GOMODCACHE="$cache/go-mod" GOCACHE="$cache/go-build" GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$kro_dir" \
    go install -trimpath "github.com/kubernetes-sigs/kro/cmd/controller@$kro_version"
fi
kubectl apply --server-side -f "$cache/go-mod/github.com/kubernetes-sigs/kro@$kro_version/helm/crds/" >/dev/null
run_kro() { # label extra-flags...
  local label=$1; shift
  local kns="bench-kro-items-$label-$$"; run_namespace "$kns"
  # A kind of its own per run (CRDs outlive namespaces here); it does not end in s, so the plural is kind + s.
  local kind="KroItems${label^}R$$"
  local plural; plural=$(tr '[:upper:]' '[:lower:]' <<<"$kind")s
  cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: { name: bench-items-$label-$$ }
spec:
  schema:
    apiVersion: v1alpha1
    kind: $kind
    spec:
      image: string | default="nginx:1.27"
      items: "[]string"
  resources:
    - id: configs
      forEach:
        - entry: \${schema.spec.items}
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "\${schema.metadata.name + '-' + entry}", labels: { app: "\${schema.metadata.name}" } }
        data: { entry: "\${entry}", image: "\${schema.spec.image}" }
YAML
  start_kro() {
    local kport; kport=$(free_port); local pport; pport=$(free_port)
    "$kro_dir/controller" --kubeconfig "$KUBECONFIG" --metrics-bind-address "127.0.0.1:$kport" \
      --health-probe-bind-address "127.0.0.1:$pport" "$@" >>"$work/kro-$label.log" 2>&1 &
    kpid=$!; pids+=("$kpid")
  }
  start_kro "$@"
  kubectl wait --for=jsonpath='{.status.state}'=Active "rgd/bench-items-$label-$$" --timeout=120s >/dev/null
  until kubectl get crd "$plural.kro.run" >/dev/null 2>&1; do sleep 0.2; done
  kubectl wait --for=condition=Established "crd/$plural.kro.run" --timeout=120s >/dev/null
  kill -9 "$kpid"; wait "$kpid" 2>/dev/null || true
  create_parents "$work/kro-$label.yaml" kro.run/v1alpha1 "$kind" "$kns" "$parents" "{ image: \"nginx:1.27\", items: [$item_list] }"
  a0=$(proc_cpu "$apiserver_pid"); e0=$(proc_cpu "$etcd_pid"); local t; t=$(now)
  start_kro "$@"
  wait_for "$kns" $((parents * items))
  local took; took=$(since "$t")
  local rate; rate=$(awk "BEGIN{print $parents/$took}")
  printf 'kro (%s), forEach over %d items: %d parents in %s s = %.0f parents/s (%.0f children/s); peak RSS %.1f MiB; %s; ruleplane / kro = %.2f×\n' \
    "$label" "$items" "$parents" "$took" "$rate" "$(awk "BEGIN{print $items*$parents/$took}")" \
    "$(awk '/VmHWM/{print $2/1024}' "/proc/$kpid/status")" "$(cpu_figures "$kpid" "$a0" "$e0")" "$(awk "BEGIN{print $rp_rate/$rate}")"
  kill -9 "$kpid"; wait "$kpid" 2>/dev/null || true
}
run_kro default
run_kro equal --dynamic-controller-concurrent-reconciles "$concurrency"
