#!/usr/bin/env bash
# Start → ready of `ruleplane run` on examples/ against each supported Kubernetes version's plane (each built once):
# the time from the process start to /readyz answering ok (every rule's worker started, its caches listed, every
# unit held), three runs each, on a fresh plane per version with the examples' other-tool CRDs installed.
#   tests/bench/startup.sh [VERSION...]      default: every supported version
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
# shellcheck source=../control-plane/versions.sh
. "$root/tests/control-plane/versions.sh"
if [ $# -gt 0 ]; then versions=$(for v in "$@"; do k8s_resolve "$v"; done); else versions=$(k8s_supported); fi
(cd "$root" && cargo build -q -p ruleplane)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }
printf '| Kubernetes | start → ready (3 runs) |\n|---|---|\n'
for version in $versions; do
  dir=$(mktemp -d -t ruleplane-startup.XXXXXX)
  K8S_VERSION=$version "$root/tests/control-plane/cluster.sh" up --dir "$dir/plane" >/dev/null 2>&1
  # shellcheck disable=SC1091
  . "$dir/plane/env"
  "$BIN_DIR/kubectl" --kubeconfig "$dir/plane/kubeconfig" apply -f "$root/examples/crds/" >/dev/null
  times=()
  for run in 1 2 3; do
    port=$(free_port)
    start=$(now)
    "$target/debug/ruleplane" run --rules "$root/examples" --crds "$root/examples/crds" \
      --kubeconfig "$dir/plane/kubeconfig" --metrics-bind-address 0 --health-probe-bind-address "127.0.0.1:$port" \
      --leader-election-namespace default --leader-elect=false --identity "startup-$run" >"$dir/run-$run.log" 2>&1 &
    manager=$!
    until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
      kill -0 $manager 2>/dev/null || { echo "the manager exited; log: $dir/run-$run.log" >&2; exit 1; }
      sleep 0.05
    done
    times+=("$(awk "BEGIN{printf \"%.2f s\", $(now) - $start}")")
    kill $manager; wait $manager 2>/dev/null || true
  done
  printf '| %s | %s |\n' "$version" "${times[*]}"
  "$root/tests/control-plane/cluster.sh" down --dir "$dir/plane" >/dev/null 2>&1
  rm -rf "$dir"
done
