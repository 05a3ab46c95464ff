#!/usr/bin/env bash
# Scheduling engine vs the real kube-scheduler v1.35 of the project's build, on a large seeded random corpus;
# prints the figures (identical feasibility, identical FailedScheduling text, kube-scheduler's node among the
# engine's best) per profile, and every disagreement. `make test` runs the same test on 40 pods.
# Usage: tests/bench/scheduler-fidelity.sh [PODS] [NODES] [SEED]   (NODES at most 100; see the test's notes)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
RULEPLANE_FIDELITY_PODS=${1:-1000} RULEPLANE_FIDELITY_NODES=${2:-100} RULEPLANE_FIDELITY_SEED=${3:-2026} \
  cargo test -q -p ruleplane --test integration scheduler_fidelity -- --nocapture 2>&1 |
  grep -E '^(scheduler fidelity|  |    |test result|thread)' || true
