#!/usr/bin/env bash
# A profile-guided production build: the `dist` build (fat LTO) with its code laid out
# and inlined by what the proxy's hot paths run, measured rather than guessed.
#
# Why: a request's instructions are not where chainedge loses to nginx. Counted with
# callgrind's cache model on the `dist` build, the plain passthrough runs 1.06x nginx's
# instructions per request but misses the instruction cache 1.35x as often, a distinct
# JSON-RPC read 2.6x (docs/benchmarks.md#profile-guided-build): the code a request walks
# through is spread over more lines than the cache holds. PGO puts the hot paths' code together and
# moves the cold code (errors, rare branches) out of their way.
#
#   scripts/pgo.sh                 build target/pgo/dist/chainedge (about 20 minutes
#                                  on 2 cores from cold)
#   PGO_PROFILE=release ...        instrument and optimise the release profile instead
#                                  (about 12 minutes; for A/B against
#                                  target/release/chainedge)
#
# Three steps: an instrumented build (target/pgo-train), a training run of it against a
# static nginx node on loopback (the gateway's hot paths: distinct reads, cached reads,
# batches, the plain and the keyed beacon passthrough, refused keys and unknown methods,
# a REST product call), then the optimised build from the merged profile. What the run
# does not reach (WebSocket and SSE sessions, the console, the indexer) is laid out as
# cold code: the same behaviour, not faster. Needs llvm-profdata of the
# same LLVM major version as rustc (`apt-get install llvm-22` for Rust 1.95).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
profile=${PGO_PROFILE:-dist}
llvm=$(rustc -vV | awk '/^LLVM version/ {split($3, v, "."); print v[1]}')
profdata=${LLVM_PROFDATA:-$(command -v "llvm-profdata-$llvm" || command -v llvm-profdata || true)}
if [ -z "$profdata" ] || ! "$profdata" --version | grep -q "LLVM version $llvm\."; then
  echo "pgo: needs llvm-profdata of LLVM $llvm (apt-get install llvm-$llvm)" >&2
  exit 2
fi
for tool in nginx oha curl python3; do
  command -v $tool >/dev/null || { echo "pgo: needs $tool" >&2; exit 2; }
done

data=$PWD/target/pgo-data
rm -rf "$data"; mkdir -p "$data"
RUSTFLAGS="-Cprofile-generate=$data" \
  cargo build --profile "$profile" -q --bin chainedge --target-dir target/pgo-train
bin=target/pgo-train/$profile/chainedge

UP=19401; CE=19403; CEM=19404
ports_free $UP $CE $CEM
work=$(mktemp -d /tmp/chainedge-pgo.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
workers=1
nginx_static_node
nginx -c "$work/upstream.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
plugins_with_plain_route
threads=2 edge_app train $CE $CEM <<YAML
health:
  interval_ms: 1000
pools:
  eth_el:
    hosts:
      - {id: static-el-1, url: "http://127.0.0.1:$UP", family: portal}
      - {id: static-el-2, url: "http://127.0.0.1:$UP", family: portal}
  eth_cl:
    hosts:
      - {id: static-cl, url: "http://127.0.0.1:$UP", family: cl-lighthouse}
YAML
sed -i "s#^plugins: .*#plugins: $work/plugins#" "$work/train.yaml"
threads=2 edge_pingora train
tenant=$("$bin" --app "$work/train.yaml" tenants create --name pgo --plan enterprise)
key=$("$bin" --app "$work/train.yaml" keys create --tenant "$tenant" 2>/dev/null)
"$bin" -c "$work/train-pingora.yaml" --app "$work/train.yaml" >/dev/null 2>"$work/edge.log" &
pids+=($!)
wait_port $CE

distinct_reads "$work/distinct.txt"
json=(-m POST -H "Content-Type: application/json")
load() { # load SECONDS ARGS...: 64 connections for that long
  local secs=$1; shift
  oha --no-tui -z "${secs}s" -c 64 "$@" >/dev/null 2>&1
}
rpc="http://127.0.0.1:$CE/rpc/eth"
# A profile of refusals would lay out the wrong paths: the edge must answer a keyed read.
curl -sf -o /dev/null -H "Content-Type: application/json" -H "x-token: $key" -d "$(head -1 "$work/distinct.txt")" "$rpc" \
  || { echo "pgo: the instrumented edge did not answer a keyed read ($work/edge.log)" >&2; cat "$work/edge.log" >&2; exit 1; }
load 20 "${json[@]}" -H "x-token: $key" -Z "$work/distinct.txt" "$rpc"
load 10 "${json[@]}" -H "x-token: $key" -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "$rpc"
load 5 "${json[@]}" -H "x-token: $key" \
  -d '[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":["0x00000000000000000000000000000000000000aa","latest"]}]' "$rpc"
load 10 "${json[@]}" -Z "$work/distinct.txt" "http://127.0.0.1:$CE/bench/plain/"
load 5 -H "x-token: $key" "http://127.0.0.1:$CE/rpc/eth-beacon/eth/v1/node/version"
load 2 "${json[@]}" -H "x-token: not-a-key" -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' "$rpc"
load 2 "${json[@]}" -H "x-token: $key" -d '{"jsonrpc":"2.0","id":1,"method":"no_such"}' "$rpc"
load 2 -H "x-token: $key" "http://127.0.0.1:$CE/v1/eth/wallet/0x00000000000000000000000000000000000000aa/balance"
# The profile is written as the process exits (SIGINT: Pingora's fast shutdown).
stop_all
pids=()
ls "$data"/*.profraw >/dev/null 2>&1 || { echo "pgo: the training run wrote no profile to $data" >&2; exit 1; }

"$profdata" merge -o "$data/merged.profdata" "$data"
# Named by its content: cargo rebuilds when RUSTFLAGS change, not when a file they name
# does, and every crate's layout comes from this profile.
used="$data/$(sha256sum "$data/merged.profdata" | cut -c1-16).profdata"
mv "$data/merged.profdata" "$used"
RUSTFLAGS="-Cprofile-use=$used" \
  cargo build --profile "$profile" -q --bin chainedge --target-dir target/pgo
echo "pgo: target/pgo/$profile/chainedge"
