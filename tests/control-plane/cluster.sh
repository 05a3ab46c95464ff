#!/usr/bin/env bash
# Starts and stops a real local Kubernetes control plane (etcd 3.5 + kube-apiserver + kube-controller-manager, and
# KWOK playing the kubelet for nodes labelled ruleplane.dev/kwok=true) on free loopback ports.
#   cluster.sh up   [--dir DIR] [--owner-pid PID] [--no-controller-manager]
#                                                   idempotent; last line: export KUBECONFIG=DIR/kubeconfig
#   cluster.sh down [--dir DIR]                     stops every process it started and removes DIR
#   cluster.sh status [--dir DIR]
# --owner-pid: a watchdog stops the plane as soon as that process exits (test binaries, even on panic or ^C).
# --no-controller-manager: etcd and kube-apiserver only (no garbage collection, namespaces never finish deleting,
#   no KWOK), for benchmarks that want nothing else on the CPU.
# APISERVER_PROFILING=true: kube-apiserver serves /debug/pprof (benchmarks' PROFILE=1 reads it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
cmd=${1:-}; shift || true
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

stop() {
  [ -d "$dir" ] || return 0
  for name in watchdog kwok kube-controller-manager kube-apiserver etcd; do
    local f="$dir/$name.pid"
    [ -f "$f" ] || continue
    local pid; pid=$(cat "$f")
    [ "$name" = watchdog ] && [ "$pid" = "${WATCHDOG_SELF:-}" ] && continue
    # A stale pid file (machine rebooted, session ended) may name a reused PID: only signal our own processes.
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$name" || continue
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
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

up() {
  if healthy && { [ $with_kcm = 0 ] || [ -n "$CONTROLLER_MANAGER_URL" ]; }; then
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
CONTROLLER_MANAGER_URL=$kcm_url
BIN_DIR=$bin
ENV
  # shellcheck disable=SC1091
  . "$dir/env"
  log "starting etcd on 127.0.0.1:$etcd_port"
  setsid "$bin/etcd" --name default --data-dir "$dir/etcd" --unsafe-no-fsync \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "default=http://127.0.0.1:$peer_port" --log-level warn \
    > "$dir/etcd.log" 2>&1 < /dev/null &
  echo $! > "$dir/etcd.pid"
  # The audit log records who wrote what (user agent, verb, object, time) for every write but Leases and
  # Events: tests read it as the witness of which replica wrote which object (docs/control-plane.md).
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
  # GenericWorkload + scheduling.k8s.io/v1alpha1: the Workload API (alpha in v1.35) for the gang tests; without
  # the gate the apiserver drops pods' spec.workloadRef. It adds that API and field and changes nothing else.
  log "starting kube-apiserver on 127.0.0.1:$api_port"
  setsid "$bin/kube-apiserver" --etcd-servers "$ETCD_URL" \
    --secure-port "$api_port" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --tls-cert-file "$dir/certs/apiserver.crt" --tls-private-key-file "$dir/certs/apiserver.key" \
    --cert-dir "$dir/certs" --client-ca-file "$dir/certs/ca.crt" \
    --service-cluster-ip-range 10.0.0.0/24 --authorization-mode RBAC \
    --disable-admission-plugins ServiceAccount --allow-privileged=true \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$dir/certs/sa.pub" --service-account-signing-key-file "$dir/certs/sa.key" \
    --token-auth-file "$dir/tokens.csv" --profiling="${APISERVER_PROFILING:-false}" \
    --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/audit.log" --audit-log-format json \
    --audit-log-mode batch --audit-log-batch-max-wait 1s --audit-log-maxsize 2048 \
    --feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1alpha1=true \
    > "$dir/kube-apiserver.log" 2>&1 < /dev/null &
  echo $! > "$dir/kube-apiserver.pid"
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
  until apiserver_ready && curl -fsS --max-time 3 --cacert "$dir/certs/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
        "$APISERVER_URL/api/v1/namespaces/default" >/dev/null 2>&1; do
    for p in etcd kube-apiserver; do
      if ! kill -0 "$(cat "$dir/$p.pid")" 2>/dev/null; then
        log "$p exited during startup; last lines of its log:"; tail -n 30 "$dir/$p.log" >&2; stop; exit 1
      fi
    done
    if [ $((SECONDS - start)) -gt 180 ]; then
      log "kube-apiserver not ready after 180 s; last lines of its log:"; tail -n 30 "$dir/kube-apiserver.log" >&2
      stop; exit 1
    fi
    sleep 0.5
  done
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

case "$cmd" in
  up) up ;;
  down) stop; log "control plane stopped" ;;
  status) if healthy; then echo "running: $APISERVER_URL"; echo "export KUBECONFIG=$dir/kubeconfig"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 up|down|status [--dir DIR] [--owner-pid PID] [--no-controller-manager]" >&2; exit 2 ;;
esac
