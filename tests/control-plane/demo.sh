#!/usr/bin/env bash
# `make demo`: runs the ruleplane manager on examples/ against the local control plane and shows what it does.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cache=${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}
target=${CARGO_TARGET_DIR:-$cache/target}
eval "$("$root/tests/control-plane/cluster.sh" up 2>/dev/null | tail -n1)"
# shellcheck disable=SC1091
. "$cache/cluster/env"
kubectl() { "$BIN_DIR/kubectl" "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "Local control plane: $APISERVER_URL (etcd + kube-apiserver $(basename "$BIN_DIR"))"
kubectl version 2>/dev/null | sed 's/^/   /'

say "Starting: ruleplane run --rules examples/  (logs below)"
"$target/debug/ruleplane" run --rules "$root/examples" --kubeconfig "$KUBECONFIG" &
manager=$!
trap 'kill $manager 2>/dev/null || true; wait $manager 2>/dev/null || true' EXIT
sleep 3

say "Stopping the manager (SIGTERM)"
kill -TERM $manager
wait $manager && echo "   manager exited cleanly"
trap - EXIT
say "The control plane keeps running for you:"
echo "   export KUBECONFIG=$KUBECONFIG"
echo "   make cluster-down    # to stop it"
