#!/usr/bin/env bash
# Bounded fuzzing of the parsers that face untrusted input: each target runs for a fixed
# time (default 60 s) with libFuzzer via cargo-fuzz (nightly toolchain, as cargo-fuzz
# needs). A crash leaves its input under fuzz/artifacts/<target>/ and fails the script;
# turn it into a regression test next to the code it broke, then fix it.
#
#   fuzz/run.sh [seconds per target] [target ...]     targets: jsonrpc routes scrub upstream_head chunked request_head http_differential
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(jsonrpc routes scrub upstream_head chunked request_head http_differential)
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
rustup toolchain list | grep -q '^nightly' || { echo "fuzz: cargo-fuzz needs a nightly toolchain (rustup toolchain install nightly)" >&2; exit 2; }
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  # Seeds: the committed examples for this target (real request shapes).
  cp -n seeds/"$t"/* "corpus/$t/" 2>/dev/null || true
  echo "== fuzz $t for ${secs}s"
  cargo +nightly fuzz run --release "$t" "corpus/$t" -- \
    -max_total_time="$secs" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 2>&1 \
    | grep -E '^(INFO: Running|#[0-9]+ *DONE|stat::number_of_executed_units|stat::peak_rss_mb|==|SUMMARY|thread .* panicked|Failing input|artifact_prefix)' || true
  if compgen -G "artifacts/$t/crash-*" >/dev/null || compgen -G "artifacts/$t/oom-*" >/dev/null; then
    echo "fuzz: $t found a failing input: $(ls artifacts/$t)" >&2
    exit 1
  fi
done
echo "fuzz: no failures"
