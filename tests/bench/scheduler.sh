#!/usr/bin/env bash
# Scheduler benchmark, scheduler_perf's shapes (SHAPE=, SchedulingBasic by default); prints figures (no pass/fail).
# Each contender runs alone on a fresh local control plane: NODES nodes (4 CPU / 32 Gi / 110 pods), the shape's init
# pods already bound, PODS pause pods (100m / 500Mi unless the shape says otherwise) created up front, then the
# scheduler starts; throughput = bindings/s (the apiserver's binding counter,
# sampled every half second), plus the scheduler's CPU-seconds and peak RSS per 1,000 pods.
#   1. Ruleplane (release build) with a DefaultProvider SchedulerPolicy, client QPS/burst $QPS/$BURST;
#   2. kube-scheduler v1.35 (the project's build), default profile, the same QPS/burst;
#   3. kube-scheduler at its defaults (QPS 50, burst 100);
#   4. the ceiling (manager/examples/bind_ceiling.rs), concurrency 32 (Ruleplane's bindings in flight): bindings
#      only, then bindings plus the Scheduled Event each (the requests a scheduler sends, without deciding).
# Usage: tests/bench/scheduler.sh [NODES] [PODS]   (release build: cargo build --release -p ruleplane)
#   ONLY="ruleplane ceiling" runs a subset (ruleplane, kube-scheduler, kube-scheduler-defaults, ceiling).
#   SHAPE= one of scheduler_perf's workloads (v1.35.4, test/integration/scheduler_perf), PODS being its measured pods:
#     basic                    SchedulingBasic (the default)
#     anti-affinity            SchedulingPodAntiAffinity: required anti-affinity per hostname (PODS + INIT <= NODES)
#     affinity                 SchedulingPodAffinity: required affinity per zone, every node in zone1
#     preferred-affinity       SchedulingPreferredPodAffinity
#     preferred-anti-affinity  SchedulingPreferredPodAntiAffinity
#     spread                   TopologySpreading: maxSkew 5 over three zones, DoNotSchedule
#     preemption               PreemptionBasic: four 900m low-priority pods per node, then PODS 3-CPU high-priority
#                              pods that each preempt three of them (INIT defaults to 4 x NODES)
#     pvc                      SchedulingCSIPVs (volumes/performance-config.yaml): every pod, init or measured, has its
#                              own claim, pre-bound to a CSI volume (ebs.csi.aws.com, 39 attachable per node, a CSINode
#                              each); INIT defaults to PODS / 2 (scheduler_perf's 1,000 / 2,000)
#     gang                     PODS / GANG gangs of GANG members each (GANG=10 by default), minCount GANG, in the
#                              plane's Workload API (K8S_VERSION: v1.37 PodGroups scheduling.k8s.io/v1beta1, v1.36
#                              v1alpha2, v1.35 Workloads v1alpha1); kube-scheduler runs with GenericWorkload (and
#                              GangScheduling before v1.37)
#   INIT= the workload's init pods, created bound before the contender starts (scheduler_perf's initPods; default
#     0 for basic, 4 x NODES for preemption, else PODS).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
nodes=${1:-500}
pods=${2:-5000}
qps=${QPS:-1000}
burst=${BURST:-2000}
shape=${SHAPE:-basic}
case "$shape" in
  basic) init=${INIT:-0} ;;
  preemption) init=${INIT:-$((4 * nodes))} ;;
  anti-affinity|affinity|preferred-affinity|preferred-anti-affinity|spread) init=${INIT:-$pods} ;;
  pvc) init=${INIT:-$((pods / 2))} ;;
  gang) init=${INIT:-0} ;;
  *) echo "unknown SHAPE: $shape"; exit 2 ;;
esac
gang=${GANG:-10}
if [ "$shape" = gang ] && [ $((pods % gang)) != 0 ]; then echo "PODS must be a multiple of GANG ($gang)"; exit 2; fi
bin=${RULEPLANE_BIN:-$target/release/ruleplane}
[ -x "$bin" ] || { echo "build first: cargo build --release -p ruleplane ($bin missing)"; exit 2; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for d in "$work"/plane-*; do [ -d "$d" ] && "$root/tests/control-plane/cluster.sh" down --dir "$d" >/dev/null 2>&1; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
now() { date +%s.%N; }

python3 - "$work" "$nodes" "$pods" "$shape" "$init" "$gang" "${K8S_VERSION:-1.37}" <<'PY'
import json, sys
work, nodes, pods, shape, init, gang = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
workload_api = {"1.35": "v1alpha1", "1.36": "v1alpha2"}.get(sys.argv[7], "v1beta1")
res = {"cpu": "4", "memory": "32Gi", "pods": "110"}
driver = "ebs.csi.aws.com"
if shape == "pvc":
    res["attachable-volumes-csi-" + driver] = "39"
def node_labels(i):
    labels = {"kubernetes.io/hostname": f"node-{i}"}
    if shape == "affinity":
        labels["topology.kubernetes.io/zone"] = "zone1"
    if shape == "spread":
        labels["topology.kubernetes.io/zone"] = f"moon-{i % 3 + 1}"
    return labels
json.dump({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": node_labels(i)},
     "status": {"capacity": res, "allocatable": res}} for i in range(nodes)]}, open(f"{work}/nodes.json", "w"))
def dump(name, items):
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(f"{work}/{name}.json", "w"))
if shape == "pvc":
    # scheduler_perf's pv-csi.yaml and pvc.yaml: a claim per pod, pre-bound (bind-completed) to its own volume.
    dump("csinodes", [{"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": f"node-{i}"},
        "spec": {"drivers": [{"name": driver, "nodeID": f"node-{i}", "allocatable": {"count": 39}}]}}
        for i in range(nodes)])
    def claims(namespace, prefix, count):
        return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": f"{prefix}{i}", "namespace": namespace,
                              "annotations": {"pv.kubernetes.io/bind-completed": "true"}},
                 "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}},
                          "volumeName": f"{namespace}-vol-{i}"}} for i in range(count)]
    def volumes(namespace, prefix, count):
        return [{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{namespace}-vol-{i}"},
                 "spec": {"accessModes": ["ReadOnlyMany"], "capacity": {"storage": "1Gi"},
                          "csi": {"driver": driver, "volumeHandle": f"{namespace}-vol-{i}"},
                          "persistentVolumeReclaimPolicy": "Retain",
                          "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                                       "name": f"{prefix}{i}"}}} for i in range(count)]
    dump("volumes", claims("bench-init", "pvc-init-", init) + claims("bench", "pvc-", pods)
         + volumes("bench-init", "pvc-init-", init) + volumes("bench", "pvc-", pods))
if shape == "gang":
    if workload_api == "v1alpha1":
        dump("workloads", [{"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": f"gang-{j}", "namespace": "bench"},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": gang}}}]}}
            for j in range(pods // gang)])
    else:
        dump("workloads", [{"apiVersion": f"scheduling.k8s.io/{workload_api}", "kind": "PodGroup",
            "metadata": {"name": f"gang-{j}", "namespace": "bench"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": gang}}}}
            for j in range(pods // gang)])
namespaces = ["bench-init", "bench"]  # scheduler_perf's sched-0 (init pods) and sched-1 (measured pods)
def term(color, key):
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key, "namespaces": namespaces}
# scheduler_perf's templates (test/integration/scheduler_perf/templates of v1.35.4), per shape: labels, affinity,
# spreading, requests, priority class.
def template(measured):
    cpu, labels, extra = "100m", {}, {}
    if shape == "anti-affinity":
        labels = {"color": "green"}
        extra["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term("green", "kubernetes.io/hostname")]}}
    elif shape == "affinity":
        labels = {"color": "blue"}
        extra["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            term("blue", "topology.kubernetes.io/zone")]}}
    elif shape == "preferred-affinity":
        labels = {"color": "red"}
        extra["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": term("red", "kubernetes.io/hostname")}]}}
    elif shape == "preferred-anti-affinity":
        labels = {"color": "yellow"}
        extra["affinity"] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": term("yellow", "kubernetes.io/hostname")}]}}
    elif shape == "spread" and measured:
        labels = {"color": "blue"}
        extra["topologySpreadConstraints"] = [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"color": "blue"}}}]
    elif shape == "preemption":
        # pod-low-priority (900m, grace period 0: a victim goes at once without a kubelet) and
        # pod-high-priority (3 CPUs: three of a node's four low pods must go).
        cpu = "3" if measured else "900m"
        extra["priorityClassName"] = "bench-high" if measured else "bench-low"
        extra["terminationGracePeriodSeconds"] = 0
    return labels, {"containers": [{"name": "pause", "image": "pause:3.10.1",
        "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}, "limits": {"cpu": cpu, "memory": "500Mi"}}}], **extra}
# Init pods are created already bound (as kube-scheduler would have placed them: one per node for the
# anti-affinity shapes, four per node for preemption, round robin otherwise), so only measured pods are bound
# by the contender and the apiserver's binding counter counts them alone.
labels, spec = template(False)
per_node = 4 if shape == "preemption" else 1
def claimed(i, prefix):
    if shape != "pvc":
        return {}
    return {"volumes": [{"name": "vol", "persistentVolumeClaim": {"claimName": f"{prefix}{i}"}}]}
json.dump({"apiVersion": "v1", "kind": "List", "items": [
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"init-{i}", "namespace": "bench-init", "labels": labels},
     "spec": {**spec, **claimed(i, "pvc-init-"), "nodeName": f"node-{(i // per_node) % nodes}"}} for i in range(init)]},
    open(f"{work}/init-pods.json", "w"))
def grouped(i):
    if shape != "gang":
        return {}
    if workload_api == "v1alpha1":
        return {"workloadRef": {"name": f"gang-{i // gang}", "podGroup": "workers"}}
    return {"schedulingGroup": {"podGroupName": f"gang-{i // gang}"}}
labels, spec = template(True)
for scheduler in ("bench-ruleplane", "default-scheduler"):
    json.dump({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}", "namespace": "bench", "labels": labels},
         "spec": {**spec, **claimed(i, "pvc-"), **grouped(i), "schedulerName": scheduler,
                  # No kubelet: new nodes keep the not-ready taint TaintNodesByCondition puts on them.
                  "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}]}}
        for i in range(pods)]}, open(f"{work}/pods-{scheduler}.json", "w"))
PY

plane() { # name → starts a fresh plane, sets KUBECONFIG and BIN_DIR
  local dir="$work/plane-$1"
  # etcd and kube-apiserver only: a scheduler needs nothing from kube-controller-manager, whose pod garbage
  # collector and graph builder would otherwise share the cores with the contender (and the earlier figures).
  "$root/tests/control-plane/cluster.sh" up --dir "$dir" --owner-pid $$ --no-controller-manager >/dev/null
  export KUBECONFIG="$dir/kubeconfig"
  # shellcheck disable=SC1091
  . "$dir/env"
}
kubectl() { "$BIN_DIR/kubectl" "$@"; }
bindings() { kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="pods"/ && /subresource="binding"/ && /code="201"/ {s+=$NF} END {printf "%d", s}'; }
# Events created (any API group): a scheduler's Scheduled Events, which kube-scheduler's broadcaster drops when its
# queue is full.
events_created() { kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="events"/ && /verb="POST"/ && /code="201"/ {s+=$NF} END {printf "%d", s}'; }
populate() { # scheduler-name
  kubectl create namespace bench >/dev/null
  kubectl create namespace bench-init >/dev/null
  kubectl create -f "$work/nodes.json" >/dev/null
  if [ "$shape" = preemption ]; then
    printf 'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: { name: bench-low }\nvalue: 0\n---\n%s\n' \
      'apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: { name: bench-high }
value: 10' | kubectl create -f - >/dev/null
  fi
  if [ "$shape" = pvc ]; then
    kubectl create -f "$work/csinodes.json" >/dev/null
    kubectl create -f "$work/volumes.json" >/dev/null
  fi
  [ "$shape" != gang ] || kubectl create -f "$work/workloads.json" >/dev/null
  [ "$init" = 0 ] || kubectl create -f "$work/init-pods.json" >/dev/null
  local t0; t0=$(now)
  kubectl create -f "$work/pods-$1.json" >/dev/null
  printf '   (%d pods created in %.0f s)\n' "$pods" "$(awk "BEGIN{print $(now) - $t0}")"
}
# Pod deletions the apiserver answered (preemption victims; nothing else deletes pods during a run).
pod_deletes() { kubectl get --raw /metrics | awk '/^apiserver_request_total\{/ && /resource="pods"/ && /verb="DELETE"/ && /code="200"/ {s+=$NF} END {printf "%d", s}'; }
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
peak_rss_mib() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
measure() { # label pid → waits for every binding, prints the figures
  local label=$1 pid=$2 started first="" last_count=0 count t
  started=$(now)
  while :; do
    sleep 0.5
    count=$(bindings); t=$(now)
    [ -z "$first" ] && [ "$count" -gt 0 ] && first=$t && first_count=$count
    [ "$count" -ge "$pods" ] && break
    if ! kill -0 "$pid" 2>/dev/null; then echo "   $label exited early"; return; fi
    if [ "$count" = "$last_count" ] && awk "BEGIN{exit !($t - $started > 120)}"; then echo "   $label stalled at $count"; break; fi
    last_count=$count
  done
  # Events trail the bindings (both schedulers queue them): wait for them (at least one per binding, then until
  # none came for 3 s; up to 60 s), and say when the last came; CPU and memory are read after that, so they
  # include sending every Event.
  local events waited=0 events_done quiet=0 previous=-1 cpu rss
  events_done=$(now)
  while [ "$waited" -lt 600 ]; do
    events=$(events_created)
    if [ "$events" != "$previous" ]; then previous=$events; quiet=0; events_done=$(now); else quiet=$((quiet + 1)); fi
    [ "$events" -ge "$count" ] && [ "$quiet" -ge 30 ] && break
    sleep 0.1; waited=$((waited + 1))
  done
  cpu=$(cpu_seconds "$pid"); rss=$(peak_rss_mib "$pid")
  awk -v l="$label" -v n="$count" -v s="$started" -v f="$first" -v fc="${first_count:-0}" -v e="$t" -v c="$cpu" -v r="$rss" 'BEGIN {
    printf "%-44s %5d pods in %6.1f s = %6.0f pods/s (steady %6.0f pods/s); CPU %6.2f s = %5.2f s per 1,000 pods; peak RSS %4d MiB\n",
      l, n, e - s, n / (e - s), (n - fc) / ((e - f) > 0 ? (e - f) : 1), c, c * 1000 / n, r }'
  echo "$label $count $(awk "BEGIN{print $t - $started}") $cpu $rss" >>"$work/results"
  printf '   %s Events created for %s bound pods, the last %.1f s after the start\n' "$events" "$count" "$(awk "BEGIN{print $events_done - $started}")"
  # By reason (a series counts once: both schedulers fold repeats of a pod's FailedScheduling into one Event).
  kubectl get events.events.k8s.io -A -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | sort | uniq -c |
    awk '{printf "%s%s %s", sep, $1, $2; sep=", "} END {print ""}' | sed 's/^/   Events by reason: /'
  [ "$shape" != preemption ] || printf '   %s victims deleted\n' "$(pod_deletes)"
}

echo "machine: $(nproc) cores; shape $shape: $nodes nodes, $init init pods (bound), $pods pods to schedule$([ "$shape" != gang ] || echo " in gangs of $gang"); client QPS $qps, burst $burst where configurable"

only=${ONLY:-ruleplane kube-scheduler kube-scheduler-defaults ceiling}
wanted() { [[ " $only " == *" $1 "* ]]; }

# --- 1. Ruleplane -----------------------------------------------------------------------------------------
if wanted ruleplane; then
plane ruleplane; populate bench-ruleplane
mkdir -p "$work/rules"
cat >"$work/rules/policy.yaml" <<YAML
apiVersion: ruleplane.dev/v1alpha1
kind: SchedulerPolicy
metadata: { name: bench }
spec: { schedulerName: bench-ruleplane, algorithmProvider: DefaultProvider }
YAML
# PERF=1: profile Ruleplane with perf (the CPU and RSS figures are then perf's, not Ruleplane's).
profiler=(); [ "${PERF:-0}" = 1 ] && profiler=(perf record -F 999 -g -o "$work/perf.data" --)
metrics_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${profiler[@]}" "$bin" run --rules "$work/rules" --kubeconfig "$KUBECONFIG" --leader-elect=false --identity bench \
  --metrics-bind-address "127.0.0.1:$metrics_port" --health-probe-bind-address 0 --kube-api-qps "$qps" --kube-api-burst "$burst" \
  >"$work/ruleplane.log" 2>&1 &
rp=$!; pids+=("$rp")
measure "Ruleplane (DefaultProvider)" "$rp"
# Scheduling cycles per outcome: more cycles than pods means retries (unschedulable, or a binding that failed).
curl -fsS "http://127.0.0.1:$metrics_port/metrics" 2>/dev/null | awk '/^ruleplane_scheduling_attempts_total/ {
  sub(/.*state="/, ""); sub(/".*\}/, " "); printf "   cycles %s\n", $0 }' || true
kill -INT "$rp" 2>/dev/null || true
if [ "${PERF:-0}" = 1 ]; then
  wait "$rp" 2>/dev/null || true
  cp "$work/perf.data" "$cache/scheduler-perf.data" # kept for `perf report -i … -g caller`
  perf report -i "$work/perf.data" --stdio --no-children --sort symbol 2>/dev/null | grep -E '^ +[0-9]' |
    sed -E 's/[[:space:]]+-[[:space:]]+-[[:space:]]*$//' | cut -c1-160 | head -40
fi
"$root/tests/control-plane/cluster.sh" down --dir "$work/plane-ruleplane" >/dev/null
fi

# --- 2, 3. kube-scheduler ---------------------------------------------------------------------------------
run_kube_scheduler() { # label qps burst
  plane "ks-$2"; populate default-scheduler
  cat >"$work/ks-$2.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: { kubeconfig: "$KUBECONFIG", qps: $2, burst: $3 }
leaderElection: { leaderElect: false }
YAML
  local gates=()
  # v1.37 has no GangScheduling gate: GenericWorkload adds the plugin.
  if [ "$shape" = gang ]; then
    case "${K8S_VERSION:-1.37}" in
      1.35|1.36) gates=(--feature-gates=GenericWorkload=true,GangScheduling=true) ;;
      *) gates=(--feature-gates=GenericWorkload=true) ;;
    esac
  fi
  "$BIN_DIR/kube-scheduler" --config="$work/ks-$2.yaml" --secure-port=0 "${gates[@]}" >"$work/ks-$2.log" 2>&1 &
  local ks=$!; pids+=("$ks")
  measure "$1" "$ks"
  kill "$ks" 2>/dev/null || true
  "$root/tests/control-plane/cluster.sh" down --dir "$work/plane-ks-$2" >/dev/null
}
if wanted kube-scheduler; then run_kube_scheduler "kube-scheduler v1.35 (QPS $qps, burst $burst)" "$qps" "$burst"; fi
if wanted kube-scheduler-defaults; then run_kube_scheduler "kube-scheduler v1.35 (defaults: QPS 50, burst 100)" 50 100; fi

# --- 4. Ceiling -------------------------------------------------------------------------------------------
if wanted ceiling; then
  (cd "$root" && cargo build -q --release -p ruleplane --example bind_ceiling)
  ceiling=$target/release/examples/bind_ceiling
  for mode in "" events; do
    plane "ceiling$mode"; populate bench-ruleplane
    "$ceiling" "$KUBECONFIG" bench 32 $mode | sed 's/^/   /'
    "$root/tests/control-plane/cluster.sh" down --dir "$work/plane-ceiling$mode" >/dev/null
  done
fi

if [ -f "$work/results" ]; then
awk '
  /^Ruleplane/ { rp_t = $(NF-2); rp_c = $(NF-1) }
  /QPS [0-9]+, burst/ && !/defaults/ { ks_t = $(NF-2); ks_c = $(NF-1) }
  END { if (rp_t > 0 && ks_t > 0) printf "ratios: Ruleplane/kube-scheduler throughput %.2f×, CPU per pod %.2f×\n", ks_t / rp_t, rp_c / ks_c }
' "$work/results"
fi
