#!/usr/bin/env bash
# Starts and stops a real local Kubernetes control plane (etcd 3.5 + kube-apiserver) on free loopback ports.
#   cluster.sh up   [--dir DIR] [--owner-pid PID]   idempotent; last line: export KUBECONFIG=DIR/kubeconfig
#   cluster.sh down [--dir DIR]                     stops every process it started and removes DIR
#   cluster.sh status [--dir DIR]
# --owner-pid: a watchdog stops the plane as soon as that process exits (test binaries, even on panic or ^C).
# APISERVER_PROFILING=true: kube-apiserver serves /debug/pprof (benchmarks' PROFILE=1 reads it).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
cmd=${1:-}; shift || true
dir="$cache/cluster"; owner=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --owner-pid) owner=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
log() { printf '[control-plane] %s\n' "$*" >&2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

healthy() {
  [ -f "$dir/env" ] || return 1
  # shellcheck disable=SC1091
  . "$dir/env"
  curl -fsS --max-time 3 --cacert "$dir/certs/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
    "$APISERVER_URL/readyz" >/dev/null 2>&1
}

stop() {
  [ -d "$dir" ] || return 0
  for name in watchdog kube-apiserver etcd; do
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
  if healthy; then
    log "control plane already running at $APISERVER_URL"
    echo "export KUBECONFIG=$dir/kubeconfig"; return
  fi
  stop
  local bin; bin=$("$here/build.sh" | tail -n1)
  mkdir -p "$dir"
  local etcd_port peer_port api_port
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  gen_certs
  local token; token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  local user_token; user_token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  # A non-admin user with no RBAC grants lets tests exercise permission checks.
  printf '%s,admin,admin,"system:masters"\n%s,ruleplane-tester,ruleplane-tester\n' "$token" "$user_token" > "$dir/tokens.csv"
  cat > "$dir/env" <<ENV
APISERVER_URL=https://127.0.0.1:$api_port
ADMIN_TOKEN=$token
USER_TOKEN=$user_token
ETCD_URL=http://127.0.0.1:$etcd_port
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
  local start=$SECONDS
  until healthy && curl -fsS --max-time 3 --cacert "$dir/certs/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
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
  log "ready in $((SECONDS - start)) s: $APISERVER_URL (Kubernetes $(basename "$bin"))"
  echo "export KUBECONFIG=$dir/kubeconfig"
}

case "$cmd" in
  up) up ;;
  down) stop; log "control plane stopped" ;;
  status) if healthy; then echo "running: $APISERVER_URL"; echo "export KUBECONFIG=$dir/kubeconfig"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 up|down|status [--dir DIR] [--owner-pid PID]" >&2; exit 2 ;;
esac
