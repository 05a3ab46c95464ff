#!/usr/bin/env bash
# Manager benchmarks on the local control plane; prints figures (no pass/fail):
#   idle RSS with examples/ (or $RULES) loaded, process start → /readyz 200, takeover after kill -9 and after SIGTERM.
# Usage: tests/bench/manager.sh [ROUNDS]   (needs `make build`; starts the control plane if needed)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
bin=${CARGO_TARGET_DIR:-$cache/target}/debug/ruleplane
[ -x "${RULEPLANE_BIN:-}" ] && bin=$RULEPLANE_BIN
rounds=${1:-5}
rules=${RULES:-$root/examples}
# shellcheck source=tests/bench/lib.sh
. "$root/tests/bench/lib.sh"

start_manager() { # id namespace -> sets $mpid $mhealth $mmetrics
  mhealth=$(free_port); mmetrics=$(free_port)
  # examples/crds/ holds another tool's vendored CRDs, not rules: --crds skips them (any other path: nothing).
  "$bin" run --rules "$rules" --crds "$root/examples/crds" --kubeconfig "$KUBECONFIG" --leader-election-namespace "$2" \
    --identity "$1" --metrics-bind-address "127.0.0.1:$mmetrics" --health-probe-bind-address "127.0.0.1:$mhealth" \
    >"$work/$1.log" 2>&1 &
  mpid=$!; pids+=("$mpid")
}

echo "binary: $bin ($(du -h "$bin" | cut -f1)); machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB"
for r in $(seq 1 "$rounds"); do
  ns="bench-$$-$r"; kubectl create namespace "$ns" >/dev/null; namespaces+=("$ns")
  t0=$(now); start_manager "a-$r" "$ns"; a=$mpid; ah=$mhealth; am=$mmetrics
  until curl -fs "http://127.0.0.1:$ah/readyz" >/dev/null 2>&1; do sleep 0.01; done
  ready=$(awk "BEGIN{print $(now) - $t0}")
  sleep 3
  rss=$(awk '/VmRSS/{print $2}' "/proc/$a/status")
  start_manager "b-$r" "$ns"; b=$mpid; bm=$mmetrics
  until curl -fs "http://127.0.0.1:$mhealth/readyz" >/dev/null 2>&1; do sleep 0.05; done
  sleep 1
  until [ "$(units_of "$am")" = 17 ] && [ "$(units_of "$bm")" = 17 ]; do sleep 0.05; done
  kill -9 "$a"; t1=$(now); wait "$a" 2>/dev/null || true
  until [ "$(units_of "$bm")" = "34" ]; do sleep 0.02; done
  takeover=$(awk "BEGIN{print $(now) - $t1}")
  start_manager "c-$r" "$ns"; c=$mpid; cm=$mmetrics
  until curl -fs "http://127.0.0.1:$mhealth/readyz" >/dev/null 2>&1; do sleep 0.05; done
  sleep 1
  until [ "$(units_of "$bm")" = 17 ] && [ "$(units_of "$cm")" = 17 ]; do sleep 0.05; done
  kill -TERM "$b"; t2=$(now)
  until [ "$(units_of "$cm")" = "34" ]; do sleep 0.02; done
  graceful=$(awk "BEGIN{print $(now) - $t2}")
  wait "$b" 2>/dev/null || true
  kill -9 "$c"; wait "$c" 2>/dev/null || true
  printf 'round %d: start→ready %.3f s, idle RSS %d KiB (%.1f MiB), takeover of the 17 units of the killed replica after kill -9 %.2f s (lease 15 s), after SIGTERM %.2f s\n' \
    "$r" "$ready" "$rss" "$(awk "BEGIN{print $rss/1024}")" "$takeover" "$graceful"
done
