#!/usr/bin/env bash
# Scheduling engine vs the real kube-scheduler of the plane's version (K8S_VERSION), on large seeded random corpora; prints
# the figures and every disagreement: the plain corpus (identical feasibility, identical FailedScheduling text,
# kube-scheduler's node among the engine's best, per profile), the volume corpus (claims, volumes, classes, CSINode
# limits) and the gang corpus (Workload gangs against kube-scheduler with its gates on). `make test` runs the same
# tests on 40 pods, 24 pods and 12 gangs.
# Usage: tests/bench/scheduler-fidelity.sh [PODS] [NODES] [SEED] [VOLUME_PODS] [GANGS]
#        (NODES at most 100; see the plain test's notes; the volume and gang corpora have fixed small node sets)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
seed=${3:-2026}
RULEPLANE_FIDELITY_PODS=${1:-1000} RULEPLANE_FIDELITY_NODES=${2:-100} RULEPLANE_FIDELITY_SEED=$seed \
  RULEPLANE_VOLUME_CORPUS_PODS=${4:-300} RULEPLANE_VOLUME_CORPUS_SEED=$seed \
  RULEPLANE_GANG_CORPUS_GANGS=${5:-60} RULEPLANE_GANG_CORPUS_SEED=$seed \
  cargo test -q -p ruleplane --test integration -- scheduler_fidelity volume_corpus gang_corpus \
    --nocapture --test-threads=1 2>&1 |
  grep -E '^(scheduler fidelity|volume corpus|gang corpus|  |    |test result|thread)' || true
