#!/usr/bin/env bash
# Reconciler benchmark on the local control plane; prints figures (no pass/fail). Same objects for every
# contender: a WebApp-like parent → a ConfigMap and a Deployment.
#   1. Ruleplane converges N parents (created before it starts): wall time, parents/s, API requests per parent,
#      peak RSS; then a second manager resyncs the converged parents: writes sent (goal 0), time, RSS; then the
#      latency from a parent update to its child's change at RATE (default 100) updates/s (manager/examples/update_latency.rs).
#      The same latency run against a minimal controller that writes the same (latency_floor.rs): the floor; in
#      the order Ruleplane, floor, floor, Ruleplane.
#   2. The ceiling: a plain server-side-apply loop (manager/examples/ssa_ceiling.rs), same concurrency; then the
#      same loop also writing each parent's status and an Event (what the Reconciler must write besides).
#   3. KRO v0.9.4 (built from its Go module into the cache by this script) with the same workload as a
#      ResourceGraphDefinition, at its defaults and at Ruleplane's concurrency (skipped with KRO=0).
# Usage: tests/bench/reconciler.sh [PARENTS] [CONCURRENCY]   (release build: cargo build --release -p ruleplane)
#   KRO=0 skips KRO; RATE sets the latency run's updates/s; PROFILE=1 saves kube-apiserver's CPU profile of the
#   first Ruleplane and floor latency runs to the cache (reconciler-apiserver.pprof, reconciler-apiserver-floor.pprof;
#   read with go tool pprof -top, compare with -diff_base).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
parents=${1:-1000}
concurrency=${2:-16}
bin=${RULEPLANE_BIN:-$target/release/ruleplane}
[ -x "$bin" ] || { echo "build first: cargo build --release -p ruleplane ($bin missing)"; exit 2; }
(cd "$root" && cargo build -q --release -p ruleplane --example ssa_ceiling --example update_latency --example latency_floor)
ceiling=$target/release/examples/ssa_ceiling
floor=$target/release/examples/latency_floor
latency=$target/release/examples/update_latency
[ "${PROFILE:-0}" = 1 ] && export APISERVER_PROFILING=true # takes effect on a fresh plane (make cluster-down first)
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
# etcd's snapshots so far (each one pauses its writes for a moment: a latency run may catch one).
etcd_snapshots() { curl -fs "$(. "$cache/cluster/env" && echo "$ETCD_URL")/metrics" | awk '/^etcd_debugging_snap_save_total_duration_seconds_count/ {print $NF}'; }
# apiserver_request_total summed over the lines matching a pattern (all verbs unless the pattern says).
requests() { kubectl get --raw /metrics | grep '^apiserver_request_total{' | { grep -E "$1" || true; } | awk '{s+=$NF} END {printf "%d", s}'; }
# Write requests to children and to the parents (status, finalizers); the metric's labels are sorted.
writes_to() { requests "resource=\"(configmaps|deployments|$1)\".*verb=\"(POST|PUT|PATCH|APPLY|DELETE)\""; }
all_requests() { requests '.'; }
# Objects of a kind in a namespace matching a selector (remainingItemCount is not served with a selector).
count() {
  local group_path=api/v1; [ "$1" = deployments ] && group_path=apis/apps/v1
  kubectl get --raw "/$group_path/namespaces/$2/$1?labelSelector=$3" 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))' 2>/dev/null || echo 0
}
wait_for_children() { # namespace selector expected-per-kind → waits until both kinds have that many
  until [ "$(count configmaps "$1" "$2")" -ge "$3" ] && [ "$(count deployments "$1" "$2")" -ge "$3" ]; do sleep 0.5; done
}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $parents parents, concurrency $concurrency"

# --- 1. Ruleplane ------------------------------------------------------------------------------------------
ns="bench-rp-$$"; kubectl create namespace "$ns" >/dev/null; namespaces+=("$ns")
mkdir -p "$work/rules"
bench_app_rules "$ns" "$concurrency" >"$work/rules/webapp.yaml"
start_manager() { # id → sets $mpid $mport
  mport=$(free_port); local hport; hport=$(free_port)
  "$bin" run --rules "$work/rules" --kubeconfig "$KUBECONFIG" --leader-election-namespace "$ns" --identity "$1" \
    --leader-elect=false --metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$hport" \
    --worker-threads "${THREADS:-0}" >"$work/$1.log" 2>&1 &
  mpid=$!; pids+=("$mpid")
  until curl -fs "http://127.0.0.1:$hport/readyz" >/dev/null 2>&1; do sleep 0.05; done
}
# The CRD first (a manager registers it), then the parents, then the timed manager.
start_manager register
until kubectl get crd benchapps.bench.ruleplane.dev >/dev/null 2>&1; do sleep 0.2; done
kubectl wait --for=condition=Established crd/benchapps.bench.ruleplane.dev --timeout=60s >/dev/null
kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true
create_parents "$work/parents.yaml" bench.ruleplane.dev/v1 BenchApp "$ns" "$parents" '{ image: "nginx:1.27" }'
before_all=$(all_requests)
status_patches() { requests 'resource="benchapps".*subresource="status".*verb="PATCH"'; }
event_posts() { requests 'resource="events".*verb="POST"'; }
before_status=$(status_patches); before_events=$(event_posts)
apiserver_pid=$(cat "$cache/cluster/kube-apiserver.pid"); etcd_pid=$(cat "$cache/cluster/etcd.pid")
apiserver_before=$(proc_cpu "$apiserver_pid"); etcd_before=$(proc_cpu "$etcd_pid")
t0=$(now); start_manager converge
wait_for_children "$ns" "app.kubernetes.io%2Fmanaged-by%3Druleplane" "$parents"
converge=$(since "$t0")
rss=$(awk '/VmHWM/{print $2}' "/proc/$mpid/status")
cpu=$(proc_cpu "$mpid")
apiserver_cpu=$(awk "BEGIN{print $(proc_cpu "$apiserver_pid") - $apiserver_before}")
etcd_cpu=$(awk "BEGIN{print $(proc_cpu "$etcd_pid") - $etcd_before}")
after_all=$(all_requests)
printf 'ruleplane: converged %d parents in %s s = %.0f parents/s; %.1f API requests per parent (all verbs, incl. status); peak RSS %.1f MiB; CPU: manager %.2f s, kube-apiserver %.2f s, etcd %.2f s\n' \
  "$parents" "$converge" "$(awk "BEGIN{print $parents/$converge}")" "$(awk "BEGIN{print ($after_all-$before_all)/$parents}")" "$(awk "BEGIN{print $rss/1024}")" "$cpu" "$apiserver_cpu" "$etcd_cpu"
reconcile_sum=$(metric "$mport" 'ruleplane_reconcile_duration_seconds_sum{rule="bench-apps"')
reconcile_count=$(metric "$mport" 'ruleplane_reconcile_duration_seconds_count{rule="bench-apps"')
printf 'ruleplane: %d reconciles while converging, %.1f ms each on average (concurrency %d, worker threads %s)\n' \
  "$reconcile_count" "$(awk "BEGIN{print 1000 * $reconcile_sum / ($reconcile_count > 0 ? $reconcile_count : 1)}")" "$concurrency" "${THREADS:-0 (one per CPU)}"
echo "ruleplane: while converging, $(lag "$mport")"
# Statuses are written after the children (the runner's reports, fewer in flight): how long the last ones take.
for _ in $(seq 1 1500); do [ $(( $(status_patches) - before_status )) -ge "$parents" ] && break; sleep 0.2; done
reported=$(since "$t0")
printf 'ruleplane: every parent status written after %s s (%.0f parents/s, %.1f s after the last child); Events created by then: %d\n' \
  "$reported" "$(awk "BEGIN{print $parents/$reported}")" "$(awk "BEGIN{print $reported - $converge}")" "$(( $(event_posts) - before_events ))"
sleep 2
kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true
before_writes=$(writes_to benchapps)
t1=$(now); start_manager resync
until [ "$(metric "$mport" 'ruleplane_reconciles_total{rule="bench-apps"')" -ge "$parents" ] 2>/dev/null; do sleep 0.1; done
resync=$(since "$t1")
sleep 1
resync_writes=$(( $(writes_to benchapps) - before_writes ))
rss=$(awk '/VmRSS/{print $2}' "/proc/$mpid/status")
printf 'ruleplane: no-op resync of %d converged parents (new manager, start → all reconciled) %s s, %d write requests; RSS with %d parents + %d children cached %.1f MiB\n' \
  "$parents" "$resync" "$resync_writes" "$parents" "$((2 * parents))" "$(awk "BEGIN{print $rss/1024}")"
echo "ruleplane: start and resync, $(lag "$mport")"
# Event → child latency on the converged set, in steady state (the manager's queue drained first): RATE parent
# updates/s for 20 s, each timed to its child's change; then the same probe against the least controller that
# writes what a Reconciler must (latency_floor.rs). In the order Ruleplane, floor, floor, Ruleplane: a plane gets
# slower or quieter over a run (etcd grows, the machine is shared), and that order puts both at the same mean
# position.
breakdown() { python3 "$root/tests/bench/latency_breakdown.py" "$work/$1-before.txt" "$work/$1-after.txt" "${@:2}"; }
apiserver_breakdown() { # every kind of request the apiserver served in the run, not only the writes expected
  breakdown apiserver apiserver_request_duration_seconds --by verb,resource,subresource |
    sed 's/^  /  kube-apiserver: /; s/ subresource=$//'
}
profile() { # file; kube-apiserver's CPU profile of 15 s of the latency run (plane started with APISERVER_PROFILING=true)
  if [ "${PROFILE:-0}" = 1 ]; then
    (sleep 3; kubectl get --raw "/debug/pprof/profile?seconds=15" >"$cache/$1") &
  fi
}
ruleplane_latency() { # label; the manager ($mpid, $mport) is running
  local label=$1
  for _ in $(seq 1 600); do
    [ "$(metric "$mport" 'ruleplane_queue_depth{rule="bench-apps"')" = 0 ] 2>/dev/null &&
      [ "$(metric "$mport" 'ruleplane_reports_waiting{rule="bench-apps"')" = 0 ] 2>/dev/null && break
    sleep 0.1
  done
  local resyncs_before reconciles_before duration_before cpu_before snapshots_before
  resyncs_before=$(curl -fs "http://127.0.0.1:$mport/metrics" | awk '/^ruleplane_watch_resyncs_total/ {s+=$NF} END {print s+0}')
  reconciles_before=$(metric "$mport" 'ruleplane_reconciles_total{rule="bench-apps"')
  duration_before=$(metric "$mport" 'ruleplane_reconcile_duration_seconds_sum{rule="bench-apps"')
  cpu_before=$(proc_cpu "$mpid"); apiserver_before=$(proc_cpu "$apiserver_pid"); etcd_before=$(proc_cpu "$etcd_pid")
  kubectl get --raw /metrics >"$work/apiserver-before.txt"; curl -fs "http://127.0.0.1:$mport/metrics" >"$work/manager-before.txt"
  if [ "$label" = ruleplane ]; then profile reconciler-apiserver.pprof; fi
  snapshots_before=$(etcd_snapshots)
  "$latency" "$KUBECONFIG" "$ns" "$parents" "${RATE:-100}" 20 | sed "s/^/$label: /"
  echo "$label: etcd snapshots during the latency run: $(( $(etcd_snapshots) - snapshots_before ))"
  kubectl get --raw /metrics >"$work/apiserver-after.txt"; curl -fs "http://127.0.0.1:$mport/metrics" >"$work/manager-after.txt"
  echo "$label: where the latency run's time went (request counts and durations in the run):"
  breakdown manager ruleplane_queue_wait_seconds rule=bench-apps | sed 's/ruleplane_queue_wait_seconds/manager: queue wait/'
  breakdown manager ruleplane_reconcile_duration_seconds rule=bench-apps | sed 's/ruleplane_reconcile_duration_seconds/manager: reconcile/'
  breakdown manager ruleplane_change_to_applied_seconds rule=bench-apps |
    sed 's/ruleplane_change_to_applied_seconds/manager: parent event received → children applied (answered)/'
  apiserver_breakdown
  breakdown apiserver etcd_request_duration_seconds 'operation=update|create' 'resource=configmaps|deployments|benchapps|events' \
    --by operation,resource | sed 's/^  /  etcd, seen by kube-apiserver: /'
  local resyncs_after reconciles duration
  resyncs_after=$(curl -fs "http://127.0.0.1:$mport/metrics" | awk '/^ruleplane_watch_resyncs_total/ {s+=$NF} END {print s+0}')
  reconciles=$(( $(metric "$mport" 'ruleplane_reconciles_total{rule="bench-apps"') - reconciles_before ))
  duration=$(awk "BEGIN{print $(metric "$mport" 'ruleplane_reconcile_duration_seconds_sum{rule="bench-apps"') - $duration_before}")
  printf '%s: during the latency run: %d reconciles (%.1f ms each on average), %d watch resyncs (lagging subscribers); CPU: manager %.2f s, kube-apiserver %.2f s, etcd %.2f s\n' \
    "$label" "$reconciles" "$(awk "BEGIN{print 1000 * $duration / ($reconciles > 0 ? $reconciles : 1)}")" "$((resyncs_after - resyncs_before))" \
    "$(awk "BEGIN{print $(proc_cpu "$mpid") - $cpu_before}")" "$(awk "BEGIN{print $(proc_cpu "$apiserver_pid") - $apiserver_before}")" \
    "$(awk "BEGIN{print $(proc_cpu "$etcd_pid") - $etcd_before}")"
  echo "$label: since the manager started, $(lag "$mport")"
}
floor_latency() { # label; the floor ($fpid) is running
  local label=$1 cpu_before snapshots_before
  kubectl get --raw /metrics >"$work/apiserver-before.txt"
  cpu_before=$(proc_cpu "$fpid"); apiserver_before=$(proc_cpu "$apiserver_pid"); etcd_before=$(proc_cpu "$etcd_pid")
  snapshots_before=$(etcd_snapshots)
  if [ "$label" = "latency floor" ]; then profile reconciler-apiserver-floor.pprof; fi
  "$latency" "$KUBECONFIG" "$ns" "$parents" "${RATE:-100}" 20 | sed "s/^/$label: /"
  echo "$label: etcd snapshots during the latency run: $(( $(etcd_snapshots) - snapshots_before ))"
  kubectl get --raw /metrics >"$work/apiserver-after.txt"
  apiserver_breakdown
  printf '%s: during its latency run: CPU: latency floor %.2f s, kube-apiserver %.2f s, etcd %.2f s\n' "$label" \
    "$(awk "BEGIN{print $(proc_cpu "$fpid") - $cpu_before}")" "$(awk "BEGIN{print $(proc_cpu "$apiserver_pid") - $apiserver_before}")" \
    "$(awk "BEGIN{print $(proc_cpu "$etcd_pid") - $etcd_before}")"
}
ruleplane_latency ruleplane
kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true
rp_rate=$(awk "BEGIN{print $parents/$converge}")
"$floor" "$KUBECONFIG" "$ns" "$concurrency" >"$work/floor.log" 2>&1 &
fpid=$!; pids+=("$fpid")
until grep -q watching "$work/floor.log"; do sleep 0.2; done
floor_latency "latency floor"
floor_latency "latency floor, again"
kill -9 "$fpid"; wait "$fpid" 2>/dev/null || true
# Ruleplane again, later in the run: the floor's writes are applied again by the new manager first (the queue
# drains before the probe starts) ...
start_manager again
until [ "$(metric "$mport" 'ruleplane_reconciles_total{rule="bench-apps"')" -ge "$parents" ] 2>/dev/null; do sleep 0.1; done
# ... and its Event lane has sent the Events of those applies (a backlog sent during the probe would be load
# the first Ruleplane run did not have).
events_sent() { curl -fs "http://127.0.0.1:$mport/metrics" | awk '/^ruleplane_events_total/ {s+=$NF} END {print s+0}'; }
sent=-1
for _ in $(seq 1 120); do
  [ "$(events_sent)" = "$sent" ] && break
  sent=$(events_sent); sleep 1
done
ruleplane_latency "ruleplane, again"
kill -9 "$mpid"; wait "$mpid" 2>/dev/null || true

# --- 2. The ceiling: plain server-side apply, same concurrency ----------------------------------------------
cns="bench-ceiling-$$"; kubectl create namespace "$cns" >/dev/null; namespaces+=("$cns")
apiserver_before=$(proc_cpu "$apiserver_pid"); etcd_before=$(proc_cpu "$etcd_pid")
out=$("$ceiling" "$KUBECONFIG" "$cns" "$parents" "$concurrency")
out="$out; CPU: kube-apiserver $(awk "BEGIN{print $(proc_cpu "$apiserver_pid") - $apiserver_before}") s, etcd $(awk "BEGIN{print $(proc_cpu "$etcd_pid") - $etcd_before}") s"
echo "$out"
ceiling_rate=$(sed -E 's/.* = ([0-9.]+) parents\/s.*/\1/' <<<"$out")
printf 'ruleplane / ceiling: %.2f×\n' "$(awk "BEGIN{print $rp_rate/$ceiling_rate}")"
# The same loop also writing what the Reconciler must write besides the applies (each parent's status, a Normal
# Event on it): the ceiling of any controller that reports as a Reconciler must, on the converged parents.
rns="bench-ceiling-reporting-$$"; kubectl create namespace "$rns" >/dev/null; namespaces+=("$rns")
apiserver_before=$(proc_cpu "$apiserver_pid"); etcd_before=$(proc_cpu "$etcd_pid")
out=$("$ceiling" "$KUBECONFIG" "$rns" "$parents" "$concurrency" "$ns")
out="$out; CPU: kube-apiserver $(awk "BEGIN{print $(proc_cpu "$apiserver_pid") - $apiserver_before}") s, etcd $(awk "BEGIN{print $(proc_cpu "$etcd_pid") - $etcd_before}") s"
echo "$out"
reporting_rate=$(sed -E 's/.* = ([0-9.]+) parents\/s.*/\1/' <<<"$out")
printf 'ruleplane / ceiling with status and Event: %.2f×\n' "$(awk "BEGIN{print $rp_rate/$reporting_rate}")"

# --- 3. KRO side by side -------------------------------------------------------------------------------------
[ "${KRO:-1}" = 0 ] && exit 0
kro_version=v0.9.4
kro_dir="$cache/kro/$kro_version"
if [ ! -x "$kro_dir/controller" ]; then
  echo "building KRO $kro_version from its Go module into $kro_dir (bench only)..."
  mkdir -p "$kro_dir"
  GOMODCACHE="$cache/go-mod" GOCACHE="$cache/go-build" GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$kro_dir" \
    go install -trimpath "github.com/kubernetes-sigs/kro/cmd/controller@$kro_version"
fi
kro_src="$cache/go-mod/github.com/kubernetes-sigs/kro@$kro_version"
kubectl apply --server-side -f "$kro_src/helm/crds/" >/dev/null
run_kro() { # label extra-flags...
  local label=$1; shift
  local kns="bench-kro-$label-$$"; kubectl create namespace "$kns" >/dev/null; namespaces+=("$kns")
  # A kind of its own per run (CRDs outlive namespaces here); it does not end in s, so the plural is kind + s.
  local kind="KroApp${label^}R$$"
  local plural; plural=$(tr '[:upper:]' '[:lower:]' <<<"$kind")s
  cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: kro.run/v1alpha1
kind: ResourceGraphDefinition
metadata: { name: bench-$label-$$ }
spec:
  schema:
    apiVersion: v1alpha1
    kind: $kind
    spec:
      image: string | default="nginx:1.27"
  resources:
    - id: config
      template:
        apiVersion: v1
        kind: ConfigMap
        metadata: { name: "\${schema.metadata.name}-config", labels: { app: "\${schema.metadata.name}" } }
        data: { image: "\${schema.spec.image}", greeting: hello }
    - id: deployment
      template:
        apiVersion: apps/v1
        kind: Deployment
        metadata: { name: "\${schema.metadata.name}", labels: { app: "\${schema.metadata.name}" } }
        spec:
          replicas: 1
          selector: { matchLabels: { app: "\${schema.metadata.name}" } }
          template:
            metadata: { labels: { app: "\${schema.metadata.name}" } }
            spec:
              containers:
                - name: web
                  image: "\${schema.spec.image}"
                  resources: { requests: { cpu: 100m, memory: 64Mi } }
YAML
  start_kro() {
    local kport; kport=$(free_port); local pport; pport=$(free_port)
    "$kro_dir/controller" --kubeconfig "$KUBECONFIG" --metrics-bind-address "127.0.0.1:$kport" \
      --health-probe-bind-address "127.0.0.1:$pport" "$@" >>"$work/kro-$label.log" 2>&1 &
    kpid=$!; pids+=("$kpid")
  }
  # As for Ruleplane: the instance kind registered first, the parents created while the controller is down,
  # then the timed start.
  start_kro "$@"
  kubectl wait --for=jsonpath='{.status.state}'=Active "rgd/bench-$label-$$" --timeout=120s >/dev/null
  until kubectl get crd "$plural.kro.run" >/dev/null 2>&1; do sleep 0.2; done
  kubectl wait --for=condition=Established "crd/$plural.kro.run" --timeout=120s >/dev/null
  kill -9 "$kpid"; wait "$kpid" 2>/dev/null || true
  create_parents "$work/kro-$label.yaml" kro.run/v1alpha1 "$kind" "$kns" "$parents" '{ image: "nginx:1.27" }'
  local t; t=$(now)
  start_kro "$@"
  wait_for_children "$kns" "app" "$parents"
  local took; took=$(since "$t")
  local krss; krss=$(awk '/VmHWM/{print $2}' "/proc/$kpid/status")
  local rate; rate=$(awk "BEGIN{print $parents/$took}")
  printf 'kro (%s): converged %d parents in %s s = %.0f parents/s; peak RSS %.1f MiB; ruleplane / kro = %.2f×\n' \
    "$label" "$parents" "$took" "$rate" "$(awk "BEGIN{print $krss/1024}")" "$(awk "BEGIN{print $rp_rate/$rate}")"
  kill -9 "$kpid"; wait "$kpid" 2>/dev/null || true
}
run_kro default
run_kro equal --dynamic-controller-concurrent-reconciles "$concurrency"
