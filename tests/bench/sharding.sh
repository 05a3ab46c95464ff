#!/usr/bin/env bash
# Active-active replicas on the local control plane; prints figures (no pass/fail). For 1, 2 and 3 replicas of
# the release build started together on PARENTS BenchApps created beforehand (the two-child workload of
# reconciler.sh: a ConfigMap and a Deployment each): start → every child there (parents/s), kube-apiserver and
# etcd CPU over it, and per replica its reconciles, objects cached, connections to the apiserver and peak RSS;
# then kill -9 of one replica → its units run on the others (s).
# Usage: tests/bench/sharding.sh [PARENTS] [CONCURRENCY] [REPLICAS...]   (release build: cargo build --release -p ruleplane)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
parents=${1:-10000}
concurrency=${2:-16}
counts=(1 2 3)
[ $# -gt 2 ] && counts=("${@:3}")
bin=${RULEPLANE_BIN:-$target/release/ruleplane}
[ -x "$bin" ] || { echo "build first: cargo build --release -p ruleplane ($bin missing)"; exit 2; }
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"
api_port=${APISERVER_URL##*:}
count() { # kind namespace → children of that kind
  local group_path=api/v1; [ "$1" = deployments ] && group_path=apis/apps/v1
  kubectl get --raw "/$group_path/namespaces/$2/$1?labelSelector=app.kubernetes.io%2Fmanaged-by%3Druleplane" 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))' 2>/dev/null || echo 0
}
cached() { curl -fs "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '/^ruleplane_watch_objects\{/ {s+=$NF} END{print s+0}'; }
connections() { ss -tnp state established "( dport = :$api_port )" 2>/dev/null | grep -c "pid=$1," || true; }
start_replica() { # id namespace → appends to $rpids $rports
  local mport hport; mport=$(free_port); hport=$(free_port)
  "$bin" run --rules "$work/rules-$2" --kubeconfig "$KUBECONFIG" --leader-election-namespace "$2" --identity "$1" \
    --metrics-bind-address "127.0.0.1:$mport" --health-probe-bind-address "127.0.0.1:$hport" \
    --log-format json >"$work/$1.log" 2>&1 &
  rpids+=("$!"); rports+=("$mport"); pids+=("$!")
}
apiserver_pid=$(cat "$cache/cluster/kube-apiserver.pid"); etcd_pid=$(cat "$cache/cluster/etcd.pid")
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $parents parents (2 children each), concurrency $concurrency per replica, 32 shards"

for replicas in "${counts[@]}"; do
  ns="bench-shard-$$-$replicas"; kubectl create namespace "$ns" >/dev/null; namespaces+=("$ns")
  mkdir -p "$work/rules-$ns"
  bench_app_rules "$ns" "$concurrency" >"$work/rules-$ns/webapp.yaml"
  # The CRD first (one replica registers it), then the parents, then the timed replicas.
  rpids=(); rports=()
  start_replica "register-$replicas" "$ns"
  until kubectl get crd benchapps.bench.ruleplane.dev >/dev/null 2>&1; do sleep 0.2; done
  kubectl wait --for=condition=Established crd/benchapps.bench.ruleplane.dev --timeout=60s >/dev/null
  kill -TERM "${rpids[0]}"; wait "${rpids[0]}" 2>/dev/null || true
  create_parents "$work/parents-$ns.yaml" bench.ruleplane.dev/v1 BenchApp "$ns" "$parents" '{ image: "nginx:1.27" }'
  rpids=(); rports=()
  apiserver_before=$(proc_cpu "$apiserver_pid"); etcd_before=$(proc_cpu "$etcd_pid")
  t0=$(now)
  for i in $(seq 1 "$replicas"); do start_replica "r$i-$ns" "$ns"; done
  until [ "$(count configmaps "$ns")" -ge "$parents" ] && [ "$(count deployments "$ns")" -ge "$parents" ]; do sleep 0.5; done
  converge=$(since "$t0")
  apiserver_cpu=$(awk "BEGIN{print $(proc_cpu "$apiserver_pid") - $apiserver_before}")
  etcd_cpu=$(awk "BEGIN{print $(proc_cpu "$etcd_pid") - $etcd_before}")
  printf '%d replica(s): converged %d parents in %s s = %.0f parents/s; CPU kube-apiserver %.1f s, etcd %.1f s\n' \
    "$replicas" "$parents" "$converge" "$(awk "BEGIN{print $parents/$converge}")" "$apiserver_cpu" "$etcd_cpu"
  sleep 2
  for i in $(seq 0 $((replicas - 1))); do
    pid=${rpids[$i]}; port=${rports[$i]}
    printf '  replica %d: %s units, %s reconciles, %s objects cached, %s connections to the apiserver, peak RSS %.1f MiB (now %.1f), CPU %.1f s\n' \
      "$((i + 1))" "$(units_of "$port")" "$(metric "$port" 'ruleplane_reconciles_total{rule="bench-apps"' || echo 0)" \
      "$(cached "$port")" "$(connections "$pid")" \
      "$(awk '/VmHWM/{print $2/1024}' "/proc/$pid/status")" "$(awk '/VmRSS/{print $2/1024}' "/proc/$pid/status")" \
      "$(proc_cpu "$pid")"
  done
  if [ "$replicas" -ge 2 ]; then
    lost=$(units_of "${rports[0]}")
    kill -9 "${rpids[0]}"; t1=$(now); wait "${rpids[0]}" 2>/dev/null || true
    until [ "$(for p in "${rports[@]:1}"; do units_of "$p"; done | awk '{s+=$1} END{print s}')" = 34 ]; do sleep 0.05; done
    printf '  kill -9 of replica 1 (%s units): the others run them after %s s (lease 15 s)\n' "$lost" "$(since "$t1")"
  fi
  for p in "${rpids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${rpids[@]}"; do wait "$p" 2>/dev/null || true; done
  kubectl delete namespace "$ns" --wait=false >/dev/null
done
