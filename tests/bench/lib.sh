# shellcheck shell=bash disable=SC2154
# What the benchmark scripts on the shared local control plane have in common; sourced, after `root` and `cache`
# are set: starts the plane if needed, points kubectl at it, and gives a work directory whose processes
# (added to `pids`) are killed on exit, and namespaces (added to `namespaces`) deleted — kube-controller-manager
# empties and removes them, so the next run's watches do not cache this run's objects.
"$root/tests/control-plane/cluster.sh" up >/dev/null
export KUBECONFIG="$cache/cluster/kubeconfig"
# shellcheck disable=SC1091
. "$cache/cluster/env"
kubectl() { "$BIN_DIR/kubectl" "$@"; }
work=$(mktemp -d)
pids=()
namespaces=()
# KEEP=1 keeps the work directory (rules, logs) and the namespaces for a look afterwards.
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then
    echo "kept: $work ${namespaces[*]}"
  else
    rm -rf "$work"
    [ ${#namespaces[@]} = 0 ] || kubectl delete namespace "${namespaces[@]}" --wait=false >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT INT TERM
now() { date +%s.%N; }
since() { awk "BEGIN{printf \"%.2f\", $(now) - $1}"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
metric() { curl -fs "http://127.0.0.1:$1/metrics" | awk -v m="$2" 'index($0, m) == 1 {print $NF}' | head -1; }
# How many units of work (34 by default: 32 Reconciler shards, resource-definitions, schedulers) a replica runs.
units_of() { curl -fs "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '/^ruleplane_unit_owned\{/ && $2=="1"{n++} END{print n+0}'; }
lag() { # metrics port → the manager's runtime lag since it started (ruleplane_runtime_lag_seconds): how late a task woke
  curl -fs "http://127.0.0.1:$1/metrics" | awk '
    /^ruleplane_runtime_lag_seconds_bucket/ { split($0, a, "\""); le[n] = a[2]; c[n++] = $NF }
    /^ruleplane_runtime_lag_seconds_count/ { total = $NF }
    END {
      for (i = 0; i < n; i++) { if (p99 == "" && c[i] >= 0.99 * total) p99 = le[i]; if (max == "" && c[i] == total) max = le[i] }
      printf "runtime lag over %d samples (100 ms apart): p99 <= %s s, max <= %s s, %d over 128 ms", total, p99, max, total - c[7] }'
}
# The two-child workload (reconciler.sh, collections.sh): BenchApp declared, and each one's ConfigMap and Deployment.
bench_app_rules() { # namespace concurrency
  cat <<YAML
apiVersion: ruleplane.dev/v1alpha1
kind: ResourceDefinition
metadata: { name: bench-app.bench.ruleplane.dev }
spec:
  versions: [ { name: v1, subresources: { status: {} } } ]
---
apiVersion: ruleplane.dev/v1alpha1
kind: Reconciler
metadata: { name: bench-apps }
spec:
  for: { apiVersion: bench.ruleplane.dev/v1, kind: BenchApp, namespace: $1 }
  concurrency: $2
  children:
    - id: config
      template: |
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "{{metadata.name}}-config", labels: { app: {{json metadata.name}} } }
        data: { image: {{json spec.image}}, greeting: hello }
    - id: deployment
      template: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: { name: {{json metadata.name}}, labels: { app: {{json metadata.name}} } }
        spec:
          replicas: 1
          selector: { matchLabels: { app: {{json metadata.name}} } }
          template:
            metadata: { labels: { app: {{json metadata.name}} } }
            spec:
              containers:
                - name: web
                  image: {{json spec.image}}
                  resources: { requests: { cpu: 100m, memory: 64Mi } }
YAML
}
create_parents() { # file apiVersion kind namespace count spec
  : >"$1"
  for i in $(seq 0 $(($5 - 1))); do
    printf -- '---\napiVersion: %s\nkind: %s\nmetadata: { name: app-%d, namespace: %s }\nspec: %s\n' "$2" "$3" "$i" "$4" "$6" >>"$1"
  done
  kubectl create -f "$1" >/dev/null
}
