#!/usr/bin/env bash
# Fuzzes the rule language: every cargo-fuzz target in config/fuzz runs for a fixed time budget.
#
#   config/fuzz/run.sh [SECONDS_PER_TARGET]      (default 30)
#
# Installs cargo-fuzz into ~/.cargo/bin if it is missing. Needs the nightly toolchain (`rustup toolchain install
# nightly`). Build output, the growing corpus and crash artifacts live under ~/.cache/ruleplane, never in the
# work tree; the seeds come from examples/, tests/rules/ and config/fuzz/seeds/. Exits non-zero as soon as a
# target finds a crash (panic, stack overflow, timeout, out-of-memory), after printing how to reproduce it.
#
# Environment: FUZZ_TARGETS="load render" runs a subset; FUZZ_SANITIZER=address builds with AddressSanitizer
# (default none: the crate forbids unsafe code, so we hunt panics and hangs and take the ~2x faster runs).
set -euo pipefail

budget="${1:-30}"
if ! [[ "$budget" =~ ^[0-9]+$ ]] || [ "$budget" -eq 0 ]; then
    echo "usage: $0 [SECONDS_PER_TARGET]" >&2
    exit 2
fi

fuzz_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$fuzz_dir/../.." && pwd)"
cache="${RULEPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ruleplane}"
target_dir="$cache/fuzz-target"
sanitizer="${FUZZ_SANITIZER:-none}"
read -r -a targets <<<"${FUZZ_TARGETS:-load render template structure}"

export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz into ~/.cargo/bin" >&2
    cargo install cargo-fuzz --locked --root "$HOME/.cargo"
fi
# The fuzz build uses its own target dir: sanitizer flags would otherwise invalidate the shared one.
export CARGO_TARGET_DIR="$target_dir"

seeds_for() {
    case "$1" in
        load) echo "$repo/examples $repo/tests/rules/valid $repo/tests/rules/invalid" ;;
        render) echo "$repo/tests/rules/render" ;;
        template) echo "$fuzz_dir/seeds/template" ;;
        structure) echo "$fuzz_dir/seeds/structure" ;;
        *) echo "" ;;
    esac
}

# Fuzz with the dependency versions the workspace uses: start from its lock file (cargo adds libfuzzer-sys and
# drops what the fuzz crate does not use). The copy is not committed.
cp "$repo/Cargo.lock" "$fuzz_dir/Cargo.lock"

cd "$repo/config"
# One build of all targets up front, so the time budget below is spent fuzzing.
cargo +nightly fuzz build --fuzz-dir "$fuzz_dir" --sanitizer "$sanitizer" --target-dir "$target_dir"
for target in "${targets[@]}"; do
    corpus="$cache/fuzz-corpus/$target"
    artifacts="$cache/fuzz-artifacts/$target/"
    mkdir -p "$corpus" "$artifacts"
    echo "== fuzzing $target for ${budget}s (corpus $corpus)"
    # shellcheck disable=SC2046 # the seed directories are space-separated on purpose
    if ! cargo +nightly fuzz run --fuzz-dir "$fuzz_dir" --sanitizer "$sanitizer" --target-dir "$target_dir" \
        "$target" "$corpus" $(seeds_for "$target") -- \
        -max_total_time="$budget" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts" -print_final_stats=1; then
        echo "FAIL: fuzz target \`$target\` crashed; inputs are in $artifacts" >&2
        echo "reproduce: cd config && cargo +nightly fuzz run --fuzz-dir fuzz --sanitizer $sanitizer $target $artifacts<file>" >&2
        exit 1
    fi
done
echo "all fuzz targets ran ${budget}s each without a crash"
