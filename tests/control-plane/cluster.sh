#!/usr/bin/env bash
# Starts and stops a real local Kubernetes control plane of the version K8S_VERSION names (default the newest
# supported; versions.sh) (etcd 3.5 + kube-apiserver + kube-controller-manager, and
# KWOK playing the kubelet for nodes labelled ruleplane.dev/kwok=true) on free loopback ports.
#   cluster.sh up   [--dir DIR] [--owner-pid PID] [--no-controller-manager]
#                                                   idempotent; last line: export KUBECONFIG=DIR/kubeconfig
#   cluster.sh down [--dir DIR]                     stops every process it started and removes DIR
#   cluster.sh status [--dir DIR]
#   cluster.sh stop|start|restart COMPONENT [--dir DIR]
#                                                   one component of a running plane (etcd, kube-apiserver): stopped
#                                                   (SIGTERM, SIGKILL after 5 s) or started again on the same port with
#                                                   the same flags and data; `start` returns once it serves again
#   cluster.sh compact [--dir DIR]                  compacts etcd at its current revision (prints it); restart
#                                                   kube-apiserver after it and every watch resumed from an older
#                                                   resourceVersion is answered 410 Expired (its watch cache starts
#                                                   afresh and etcd no longer has the history)
# --owner-pid: a watchdog stops the plane as soon as that process exits (test binaries, even on panic or ^C).
# --no-controller-manager: etcd and kube-apiserver only (no garbage collection, namespaces never finish deleting,
#   no KWOK), for benchmarks that want nothing else on the CPU.
# APISERVER_PROFILING=true: kube-apiserver serves /debug/pprof (benchmarks' PROFILE=1 reads it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.sh
. "$here/versions.sh"
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
cmd=${1:-}; shift || true
component=""
case "$cmd" in stop|start|restart) component=${1:-}; shift || true ;; esac
dir="$cache/cluster"; owner=""; with_kcm=1
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --owner-pid) owner=$2; shift 2 ;;
    --no-controller-manager) with_kcm=0; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
log() { printf '[control-plane] %s\n' "$*" >&2; }

# What kube-controller-manager runs: what a test plane without a kubelet can use. Owner-reference cascades, namespace
# deletion, the default ServiceAccount (and legacy token Secrets), PersistentVolumeClaim binding, generic ephemeral
# volumes' claims, and deleting pods bound to nodes that no longer exist. Not the workload controllers (Deployments
# stay without ReplicaSets, so the Helm chart's Deployment starts no pods) nor the root-CA ConfigMap publisher (no
# extra ConfigMap per namespace).
KCM_CONTROLLERS=garbage-collector-controller,namespace-controller,serviceaccount-controller
KCM_CONTROLLERS+=,serviceaccount-token-controller,persistentvolume-binder-controller,pod-garbage-collector-controller
KCM_CONTROLLERS+=,ephemeral-volume-controller
# The HPA controller scales a target up to minReplicas even without metrics (handed-over fields are tested so).
KCM_CONTROLLERS+=,horizontal-pod-autoscaler-controller

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

apiserver_ready() {
  curl -fsS --max-time 3 --cacert "$dir/certs/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
    "$APISERVER_URL/readyz" >/dev/null 2>&1
}

healthy() {
  [ -f "$dir/env" ] || return 1
  # shellcheck disable=SC1091
  . "$dir/env"
  apiserver_ready || return 1
  # A plane started before kube-controller-manager was part of it has no CONTROLLER_MANAGER_URL: start afresh.
  [ -n "${CONTROLLER_MANAGER_URL+set}" ] || return 1
  [ -z "$CONTROLLER_MANAGER_URL" ] || controller_manager_healthy || return 1
  # A plane started before KWOK was part of it (or whose KWOK died) is started afresh.
  [ -z "$CONTROLLER_MANAGER_URL" ] || process_alive kwok
}

process_alive() { # name: its pid file names a live process of that name
  local f="$dir/$1.pid"
  [ -f "$f" ] && tr '\0' ' ' < "/proc/$(cat "$f")/cmdline" 2>/dev/null | grep -q -- "$1"
}

# Its serving certificate is self-signed (in DIR/kube-controller-manager-certs); /healthz needs no credential.
controller_manager_healthy() {
  curl -fsSk --max-time 3 "$CONTROLLER_MANAGER_URL/healthz" >/dev/null 2>&1
}

# Stops one process the plane started (SIGTERM, SIGKILL after 5 s) and forgets its pid file.
stop_process() { # name
  local f="$dir/$1.pid"
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  # A stale pid file (machine rebooted, session ended) may name a reused PID: only signal our own processes.
  if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$1"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$f"
}

stop() {
  [ -d "$dir" ] || return 0
  for name in watchdog kwok kube-controller-manager kube-apiserver etcd; do
    [ "$name" = watchdog ] && [ -f "$dir/watchdog.pid" ] && [ "$(cat "$dir/watchdog.pid")" = "${WATCHDOG_SELF:-}" ] \
      && continue
    stop_process "$name"
  done
  rm -rf "$dir"
}

gen_certs() {
  local c="$dir/certs"; mkdir -p "$c"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$c/ca.key" -out "$c/ca.crt" -days 30 \
    -subj "/CN=ruleplane-test-ca" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout "$c/apiserver.key" -out "$c/apiserver.csr" \
    -subj "/CN=kube-apiserver" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc\n' > "$c/san.ext"
  openssl x509 -req -in "$c/apiserver.csr" -CA "$c/ca.crt" -CAkey "$c/ca.key" -CAcreateserial \
    -out "$c/apiserver.crt" -days 30 -extfile "$c/san.ext" 2>/dev/null
  openssl genrsa -out "$c/sa.key" 2048 2>/dev/null
  openssl rsa -in "$c/sa.key" -pubout -out "$c/sa.pub" 2>/dev/null
}

write_kubeconfig() { # name token
  cat > "$dir/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: ruleplane-local
  cluster:
    server: $APISERVER_URL
    certificate-authority: $dir/certs/ca.crt
users:
- name: $1
  user:
    token: $2
contexts:
- name: $1@ruleplane-local
  context: { cluster: ruleplane-local, user: $1, namespace: default }
current-context: $1@ruleplane-local
KC
}

# etcd and kube-apiserver are started from DIR/env alone, so `start`/`restart` bring them back on the same ports
# with the same flags and data.
start_etcd() {
  log "starting etcd on ${ETCD_URL#http://}"
  setsid "$BIN_DIR/etcd" --name default --data-dir "$dir/etcd" --unsafe-no-fsync \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "$ETCD_PEER_URL" --initial-advertise-peer-urls "$ETCD_PEER_URL" \
    --initial-cluster "default=$ETCD_PEER_URL" --log-level warn \
    >> "$dir/etcd.log" 2>&1 < /dev/null &
  echo $! > "$dir/etcd.pid"
}

etcd_ready() { curl -fsS --max-time 3 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"'; }

# The audit log records who wrote what (user agent, verb, object, time) for every write but Leases and
# Events: tests read it as the witness of which replica wrote which object (docs/control-plane.md).
write_audit_policy() {
  cat > "$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    resources:
      - group: coordination.k8s.io
        resources: [leases]
      - group: ""
        resources: [events]
      - group: events.k8s.io
        resources: [events]
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
POLICY
}

# GenericWorkload + the Workload API's version of the plane's Kubernetes (scheduling.k8s.io/v1alpha1 in v1.35,
# v1alpha2 in v1.36, v1beta1 in v1.37; none is served by default) for the gang tests; without the gate the apiserver
# drops pods' reference to their group (spec.workloadRef in v1.35, spec.schedulingGroup since v1.36). It adds that
# API and field and changes nothing else.
# No endpoint reconciler: the `kubernetes` Service's endpoints would name the loopback address, which v1.37 refuses
# to advertise ("may not be in the loopback range"); nothing in the plane reaches the apiserver through that Service.
# Its logs are appended to (the audit log too), so a restarted apiserver keeps the record of the one before.
workload_api_version() { # the plane's Kubernetes version (v1.MINOR.PATCH) → the Workload API version it serves
  case "$1" in
    v1.35.*) echo v1alpha1 ;;
    v1.36.*) echo v1alpha2 ;;
    *) echo v1beta1 ;;
  esac
}

start_apiserver() {
  log "starting kube-apiserver $(basename "$BIN_DIR") on ${APISERVER_URL#https://}"
  setsid "$BIN_DIR/kube-apiserver" --etcd-servers "$ETCD_URL" \
    --secure-port "${APISERVER_URL##*:}" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --endpoint-reconciler-type none \
    --tls-cert-file "$dir/certs/apiserver.crt" --tls-private-key-file "$dir/certs/apiserver.key" \
    --cert-dir "$dir/certs" --client-ca-file "$dir/certs/ca.crt" \
    --service-cluster-ip-range 10.0.0.0/24 --authorization-mode RBAC \
    --disable-admission-plugins ServiceAccount --allow-privileged=true \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$dir/certs/sa.pub" --service-account-signing-key-file "$dir/certs/sa.key" \
    --token-auth-file "$dir/tokens.csv" --profiling="${APISERVER_PROFILING:-false}" \
    --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/audit.log" --audit-log-format json \
    --audit-log-mode batch --audit-log-batch-max-wait 1s --audit-log-maxsize 2048 \
    --feature-gates=GenericWorkload=true \
    --runtime-config="scheduling.k8s.io/$(workload_api_version "$(basename "$BIN_DIR")")=true" \
    >> "$dir/kube-apiserver.log" 2>&1 < /dev/null &
  echo $! > "$dir/kube-apiserver.pid"
}

# Until kube-apiserver serves (ready, and the default namespace readable): 1 if etcd or kube-apiserver exits or
# SECONDS pass, with the last lines of the culprit's log.
wait_apiserver() { # seconds
  local start=$SECONDS p
  until apiserver_ready && curl -fsS --max-time 3 --cacert "$dir/certs/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
        "$APISERVER_URL/api/v1/namespaces/default" >/dev/null 2>&1; do
    for p in etcd kube-apiserver; do
      if ! process_alive "$p"; then
        log "$p exited during startup; last lines of its log:"; tail -n 30 "$dir/$p.log" >&2; return 1
      fi
    done
    if [ $((SECONDS - start)) -gt "$1" ]; then
      log "kube-apiserver not ready after $1 s; last lines of its log:"; tail -n 30 "$dir/kube-apiserver.log" >&2
      return 1
    fi
    sleep 0.5
  done
}

up() {
  # A running plane of another version (K8S_VERSION) is started afresh.
  if healthy && [ "$(basename "$BIN_DIR")" = "$k8s_version" ] \
     && { [ $with_kcm = 0 ] || [ -n "$CONTROLLER_MANAGER_URL" ]; }; then
    log "control plane already running at $APISERVER_URL"
    echo "export KUBECONFIG=$dir/kubeconfig"; return
  fi
  [ ! -f "$dir/env" ] || log "restarting the control plane in $dir (stopped, or without the components asked for)"
  stop
  local bin; bin=$("$here/build.sh" | tail -n1)
  mkdir -p "$dir"
  local etcd_port peer_port api_port kcm_url=""
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  [ $with_kcm = 0 ] || kcm_url=https://127.0.0.1:$(free_port)
  gen_certs
  local token; token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  local user_token; user_token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  local kcm_token; kcm_token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  # A non-admin user with no RBAC grants lets tests exercise permission checks. kube-controller-manager has a
  # user of its own (in system:masters, as it runs without per-controller service-account credentials).
  { printf '%s,admin,admin,"system:masters"\n%s,ruleplane-tester,ruleplane-tester\n' "$token" "$user_token"
    printf '%s,system:kube-controller-manager,system:kube-controller-manager,"system:masters"\n' "$kcm_token"
  } > "$dir/tokens.csv"
  cat > "$dir/env" <<ENV
APISERVER_URL=https://127.0.0.1:$api_port
ADMIN_TOKEN=$token
USER_TOKEN=$user_token
ETCD_URL=http://127.0.0.1:$etcd_port
ETCD_PEER_URL=http://127.0.0.1:$peer_port
CONTROLLER_MANAGER_URL=$kcm_url
BIN_DIR=$bin
ENV
  # shellcheck disable=SC1091
  . "$dir/env"
  start_etcd
  write_audit_policy
  start_apiserver
  if [ -n "$owner" ]; then
    # Detached watchdog: survives the caller, stops the plane when the owner process is gone.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; WATCHDOG_SELF=$$ exec "$2" down --dir "$3"' \
      watchdog "$owner" "$here/cluster.sh" "$dir" > /dev/null 2>&1 < /dev/null &
    echo $! > "$dir/watchdog.pid"
  fi
  write_kubeconfig kubeconfig "$token"
  mv "$dir/kubeconfig.kubeconfig" "$dir/kubeconfig"
  write_kubeconfig user "$user_token"
  write_kubeconfig kube-controller-manager "$kcm_token"
  local start=$SECONDS
  wait_apiserver 180 || { stop; exit 1; }
  log "kube-apiserver ready in $((SECONDS - start)) s: $APISERVER_URL (Kubernetes $(basename "$bin"))"
  [ -z "$kcm_url" ] || start_controller_manager "$bin" "${kcm_url##*:}"
  [ -z "$kcm_url" ] || start_kwok "$bin"
  log "ready in $((SECONDS - start)) s"
  echo "export KUBECONFIG=$dir/kubeconfig"
}

# After kube-apiserver is ready (it would only retry until then). Healthy when /healthz answers ok and its
# service-account controller has created the default ServiceAccount: its informers have synced.
start_controller_manager() { # bin port
  local kc="$dir/kube-controller-manager.kubeconfig"
  log "starting kube-controller-manager on 127.0.0.1:$2"
  # No --authentication/--authorization-kubeconfig: only /healthz is asked for, always allowed without them.
  setsid "$1/kube-controller-manager" --kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$2" --cert-dir "$dir/kube-controller-manager-certs" \
    --controllers "$KCM_CONTROLLERS" --leader-elect=false --use-service-account-credentials=false \
    --service-account-private-key-file "$dir/certs/sa.key" --root-ca-file "$dir/certs/ca.crt" \
    > "$dir/kube-controller-manager.log" 2>&1 < /dev/null &
  echo $! > "$dir/kube-controller-manager.pid"
  local start=$SECONDS
  until controller_manager_healthy && curl -fsS --max-time 3 --cacert "$dir/certs/ca.crt" \
        -H "Authorization: Bearer $ADMIN_TOKEN" "$APISERVER_URL/api/v1/namespaces/default/serviceaccounts/default" \
        >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$dir/kube-controller-manager.pid")" 2>/dev/null; then
      log "kube-controller-manager exited during startup; last lines of its log:"
      tail -n 30 "$dir/kube-controller-manager.log" >&2; stop; exit 1
    fi
    if [ $((SECONDS - start)) -gt 60 ]; then
      log "kube-controller-manager not healthy after 60 s; last lines of its log:"
      tail -n 30 "$dir/kube-controller-manager.log" >&2; stop; exit 1
    fi
    sleep 0.2
  done
  log "kube-controller-manager healthy in $((SECONDS - start)) s (controllers: $KCM_CONTROLLERS)"
}

# KWOK (sigs.k8s.io/kwok, built by build.sh) plays the kubelet, only for nodes labelled ruleplane.dev/kwok=true: it
# marks them Ready, runs their pods (Running, Ready, startTime, pod IP) and removes their pods once deleted (no grace
# period is waited out). Every other node has no kubelet: its pods stay Pending and its deleted pods Terminating.
start_kwok() { # bin
  log "starting kwok for nodes labelled ruleplane.dev/kwok=true"
  setsid "$1/kwok" --kubeconfig "$dir/kubeconfig" --config "$1/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-label-selector=ruleplane.dev/kwok=true \
    > "$dir/kwok.log" 2>&1 < /dev/null &
  echo $! > "$dir/kwok.pid"
  local start=$SECONDS
  # Ready once it watches nodes (its log says so); it has no health endpoint unless asked to serve one.
  until grep -q '"msg":"Watch nodes"' "$dir/kwok.log" 2>/dev/null; do
    if ! kill -0 "$(cat "$dir/kwok.pid")" 2>/dev/null; then
      log "kwok exited during startup; last lines of its log:"; tail -n 30 "$dir/kwok.log" >&2; stop; exit 1
    fi
    if [ $((SECONDS - start)) -gt 60 ]; then
      log "kwok not watching nodes after 60 s; last lines of its log:"; tail -n 30 "$dir/kwok.log" >&2; stop; exit 1
    fi
    sleep 0.2
  done
}

# The plane's env, for the commands that act on a running plane.
load_env() {
  [ -f "$dir/env" ] || { log "no control plane in $dir (cluster.sh up first)"; exit 1; }
  # shellcheck disable=SC1091
  . "$dir/env"
  [ -n "${ETCD_PEER_URL:-}" ] || { log "the plane in $dir predates restarts: cluster.sh down, then up"; exit 1; }
}

check_component() {
  case "$component" in
    etcd|kube-apiserver) ;;
    *) echo "usage: $0 stop|start|restart etcd|kube-apiserver [--dir DIR]" >&2; exit 2 ;;
  esac
}

# Starts a stopped component again and returns once it serves: kube-apiserver ready; etcd healthy (and, if
# kube-apiserver runs, kube-apiserver ready again on it). Starting one that runs is a no-op.
start_component() {
  if process_alive "$component"; then log "$component already running"; return; fi
  local start=$SECONDS
  case "$component" in
    etcd)
      start_etcd
      until etcd_ready; do
        if ! process_alive etcd; then
          log "etcd exited during startup; last lines of its log:"; tail -n 30 "$dir/etcd.log" >&2; exit 1
        fi
        [ $((SECONDS - start)) -le 60 ] || { log "etcd not healthy after 60 s"; tail -n 30 "$dir/etcd.log" >&2; exit 1; }
        sleep 0.2
      done
      ! process_alive kube-apiserver || wait_apiserver 120 || exit 1 ;;
    kube-apiserver)
      start_apiserver
      wait_apiserver 120 || exit 1 ;;
  esac
  log "$component serving again in $((SECONDS - start)) s"
}

# Compacts etcd's history at its current revision through etcd's v3 JSON gateway (the Debian package ships no
# etcdctl). kube-apiserver's watch cache then relists, and watches resumed from before it are answered 410 Expired.
compact() {
  local revision
  revision=$(curl -fsS --max-time 5 -X POST "$ETCD_URL/v3/kv/range" -d '{"key":"AA==","limit":1}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
  curl -fsS --max-time 30 -X POST "$ETCD_URL/v3/kv/compaction" -d "{\"revision\":\"$revision\",\"physical\":true}" \
    >/dev/null
  log "etcd compacted at revision $revision"
  echo "$revision"
}

case "$cmd" in
  up) up ;;
  down) stop; log "control plane stopped" ;;
  stop) check_component; load_env; stop_process "$component"; log "$component stopped" ;;
  start) check_component; load_env; start_component ;;
  restart) check_component; load_env; stop_process "$component"; log "$component stopped"; start_component ;;
  compact) load_env; compact ;;
  status) if healthy; then echo "running: $APISERVER_URL"; echo "export KUBECONFIG=$dir/kubeconfig"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 up|down|status|compact [--dir DIR] [--owner-pid PID] [--no-controller-manager]" >&2
     echo "       $0 stop|start|restart etcd|kube-apiserver [--dir DIR]" >&2; exit 2 ;;
esac
