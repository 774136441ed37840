#!/usr/bin/env bash
# Bounded fuzzing of the parsers that face untrusted input: each target runs for a fixed
# time (default 60 s) with libFuzzer via cargo-fuzz. A crash leaves its input under
# fuzz/artifacts/<target>/ and fails the script; turn it into a regression test next to
# the code it broke, then fix it.
#
# With a nightly toolchain the targets run under AddressSanitizer. Without one (a fresh
# CI machine has only the stable toolchain), they run uninstrumented for memory errors
# (`-s none`: coverage-guided all the same; the code under test is safe Rust), building
# on stable with RUSTC_BOOTSTRAP for the one unstable flag cargo-fuzz passes.
#
# With FUZZ_SEED set (the CI smoke run), each target starts from its committed seeds only
# (a fresh corpus-smoke/ directory) with that libFuzzer seed: the run is the same walk on
# every machine, so a finding reproduces and CI does not fail on a lucky draw that the
# last local run did not meet. Without it, runs grow corpus/ and draw a new seed.
#
#   FUZZ_JOBS=n fuzz/run.sh [seconds per target] [target ...]     targets: jsonrpc routes scrub upstream_head chunked request_head http_differential signed_tx sol_tx proxy_protocol
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(jsonrpc routes scrub upstream_head chunked request_head http_differential signed_tx sol_tx proxy_protocol)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
if [ "${FUZZ_TOOLCHAIN:-}" != stable ] && rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  fuzz=(cargo +nightly fuzz)
  sanitizer=address
else
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz)
  sanitizer=none
fi
echo "== fuzz: building the targets (sanitizer: $sanitizer)"
"${fuzz[@]}" build --release -s "$sanitizer" >build.log 2>&1 || {
  tail -30 build.log >&2
  exit 1
}
# FUZZ_BUILD_ONLY=1: the build alone (CI starts it early, at low priority, beside the
# test suite; the smoke run after finds it done).
[ -z "${FUZZ_BUILD_ONLY:-}" ] || { echo "fuzz: targets built"; exit 0; }
# One target's run; its exit status is libFuzzer's.
fuzz_one() {
  local t=$1 corpus="corpus/$1" seed_flag=()
  if [ -n "${FUZZ_SEED:-}" ]; then
    corpus="corpus-smoke/$t"
    rm -rf "$corpus"
    seed_flag=(-seed="$FUZZ_SEED")
  fi
  mkdir -p "$corpus"
  # Seeds: the committed examples for this target (real request shapes).
  cp -n seeds/"$t"/* "$corpus/" 2>/dev/null || true
  "${fuzz[@]}" run --release -s "$sanitizer" "$t" "$corpus" -- \
    -max_total_time="$secs" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 "${seed_flag[@]}" \
    >"run-$t.log" 2>&1
}
# The targets run FUZZ_JOBS at a time (default: one per core), each on its own core:
# the smoke run's wall is the seconds times the targets over the cores.
jobs=${FUZZ_JOBS:-$(nproc)}
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    echo "== fuzz $t for ${secs}s"
    fuzz_one "$t" &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    t=${batch[$k]}
    rc=0
    wait "${pids[$k]}" || rc=$?
    grep -E '^(INFO: Running|#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb|==[0-9]+==|SUMMARY|thread .* panicked|Failing input|artifact_prefix)' "run-$t.log" || true
    if [ "$rc" -ne 0 ]; then
      tail -20 "run-$t.log" >&2
      echo "fuzz: $t failed (exit $rc); inputs: $(ls artifacts/$t 2>/dev/null)" >&2
      failed+=("$t")
    fi
  done
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: failures in ${failed[*]}" >&2; exit 1; }
echo "fuzz: no failures"
