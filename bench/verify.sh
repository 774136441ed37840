#!/usr/bin/env bash
# What checking answers costs in wall-clock time, node calls and CPU (issues 65-67):
# one real anvil with a block of eight transactions (transfers and token calls that
# log), two edges before it with the response cache off, `rpc.verify.mode: off` and
# `enforce` (account reads proven, `root: {ask: 1}`), asked the same checked reads in interleaved rounds (oha, 8 connections,
# $1 seconds each, 3 rounds; the median round reported). Per read: requests/s, p50 and
# p99 (ms), node calls per request (the edge's own attempt counter), and the edge's CPU
# per request (user+system from /proc, µs). The block's facts and receipts are warm (one
# block, asked again and again): the per-block cache a busy wallet read meets.
#
#   bash bench/verify.sh [secs]        -> bench/RESULTS-verify.md
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
secs=${1:-5}
conns=8
rounds=3
command -v oha >/dev/null || cargo install oha --locked -q
cargo build --profile ${BENCH_PROFILE:-release} -q --bin chainedge
bin=target/${BENCH_PROFILE:-release}/chainedge
anvil=node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil

work=$(mktemp -d /tmp/chainedge-verifybench.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
NODE=19301; OFF=19302; OFFM=19303; ON=19304; ONM=19305
ports_free $NODE $OFF $OFFM $ON $ONM

"$anvil" --port $NODE --silent &
pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$NODE" && break; sleep 0.1; done
node_rpc() { curl -s -H 'Content-Type: application/json' -d "$1" "http://127.0.0.1:$NODE"; }
# The block: four transfers and four calls to a contract that logs (its constructor
# returns code that emits LOG1 on any call).
DEV=0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266
deploy=$(node_rpc '{"jsonrpc":"2.0","id":1,"method":"eth_sendTransaction","params":[{"from":"'$DEV'","data":"0x6009600c60003960096000f3602a60005260206000a100"}]}')
contract=$(node_rpc '{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionReceipt","params":['"$(echo "$deploy" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["result"]))')"']}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["contractAddress"])')
node_rpc '{"jsonrpc":"2.0","id":1,"method":"evm_setAutomine","params":[false]}' >/dev/null
for i in 1 2 3 4; do
  node_rpc '{"jsonrpc":"2.0","id":1,"method":"eth_sendTransaction","params":[{"from":"'$DEV'","to":"0x70997970c51812dc3a010c7d01b50e0d17dc79c8","value":"0x'$i'"}]}' >/dev/null
  node_rpc '{"jsonrpc":"2.0","id":1,"method":"eth_sendTransaction","params":[{"from":"'$DEV'","to":"'$contract'","data":"0x0'$i'","gas":"0x20000"}]}' >/dev/null
done
node_rpc '{"jsonrpc":"2.0","id":1,"method":"evm_mine","params":[]}' >/dev/null
block=$(node_rpc '{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}')
number=$(echo "$block" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["number"])')
tx=$(echo "$block" | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["transactions"][3])')
ntx=$(echo "$block" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["result"]["transactions"]))')

app() { # app NAME PORT METRICS MODE
  edge_app "$1" "$2" "$3" <<YAML
health:
  interval_ms: 5000
rpc:
  cache: {enabled: false}
  coalesce: false
  hedge: {enabled: false}
  verify: {mode: "$4", root: {ask: 1}}
pools:
  eth_el:
    hosts:
      - {id: anvil, url: "http://127.0.0.1:$NODE", family: el-anvil}
YAML
  edge_pingora "$1"
  local tenant
  tenant=$($bin --app "$work/$1.yaml" tenants create --name bench --plan enterprise)
  $bin --app "$work/$1.yaml" keys create --tenant "$tenant" 2>/dev/null > "$work/$1.key"
  $bin -c "$work/$1-pingora.yaml" --app "$work/$1.yaml" >/dev/null 2>"$work/$1.log" &
  pids+=($!)
  echo $! > "$work/$1.pidnum"
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$2/console/" && break; sleep 0.1; done
}
app off $OFF $OFFM off
app on $ON $ONM enforce

attempts() { # attempts METRICS_PORT -> node calls the edge made so far
  curl -s "http://127.0.0.1:$1/metrics" \
    | awk '/^chainedge_upstream_attempts_total/ {s += $2} END {printf "%d\n", s}'
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME PORT METRICS BODY -> "rps p50 p99 calls_per_req cpu_us_per_req"
run() {
  local name=$1 port=$2 mport=$3 body=$4 pid calls0 calls1 cpu0 cpu1
  pid=$(cat "$work/$name.pidnum")
  curl -s -o /dev/null -H 'Content-Type: application/json' -H "x-token: $(cat "$work/$name.key")" \
    -d "$body" "http://127.0.0.1:$port/rpc/eth"
  calls0=$(attempts "$mport"); cpu0=$(cpu_ticks "$pid")
  oha --no-tui --output-format json -z "${secs}s" -c $conns -m POST \
    -H "Content-Type: application/json" -H "x-token: $(cat "$work/$name.key")" \
    -d "$body" "http://127.0.0.1:$port/rpc/eth" > "$work/out.json" 2>/dev/null
  calls1=$(attempts "$mport"); cpu1=$(cpu_ticks "$pid")
  python3 - "$work/out.json" "$calls0" "$calls1" "$cpu0" "$cpu1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
codes = o.get("statusCodeDistribution", {})
n = sum(codes.values())
if set(codes) != {"200"}:
    sys.exit(f"bench: answers other than 200: {codes}")
calls = (int(sys.argv[3]) - int(sys.argv[2])) / n
cpu_us = (int(sys.argv[5]) - int(sys.argv[4])) / int(sys.argv[6]) * 1e6 / n
s = o["summary"]; p = o["latencyPercentiles"]
print(f'{s["requestsPerSec"]:.0f} {p["p50"]*1000:.3f} {p["p99"]*1000:.3f} {calls:.2f} {cpu_us:.0f}')
PY
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
reads=(
  "block full|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockByNumber\",\"params\":[\"$number\",true]}"
  "block hashes-only|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockByNumber\",\"params\":[\"$number\",false]}"
  "block receipts|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBlockReceipts\",\"params\":[\"$number\"]}"
  "transaction receipt|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getTransactionReceipt\",\"params\":[\"$tx\"]}"
  "transaction|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getTransactionByHash\",\"params\":[\"$tx\"]}"
  "balance (proof)|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getBalance\",\"params\":[\"$DEV\",\"$number\"]}"
  "storage word (proof)|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getStorageAt\",\"params\":[\"$contract\",\"0x0\",\"$number\"]}"
  "code (proof)|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getCode\",\"params\":[\"$contract\",\"$number\"]}"
  "logs of the range (root)|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getLogs\",\"params\":[{\"fromBlock\":\"0x1\",\"toBlock\":\"$number\",\"address\":\"$contract\"}]}"
  "block number (not checked)|{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_blockNumber\",\"params\":[]}"
)
rows=""
for entry in "${reads[@]}"; do
  what=${entry%%|*}; body=${entry#*|}
  : > "$work/off.rows"; : > "$work/on.rows"
  for _ in $(seq $rounds); do
    run off $OFF $OFFM "$body" >> "$work/off.rows"
    run on $ON $ONM "$body" >> "$work/on.rows"
  done
  col() { awk -v c="$2" '{print $c}' "$work/$1.rows" | median; }
  rows+="| $what | $(col off 1) / $(col on 1) | $(col off 2) / $(col on 2) | $(col off 3) / $(col on 3) | $(col off 4) / $(col on 4) | $(col off 5) / $(col on 5) |"$'\n'
done

# The light client's own CPU at mainnet's committee size (512 keys, 500 signing): per
# bootstrap (512 keys checked) and per update (branches, 500 keys aggregated, one
# pairing check), from src/verify/light_client/tests.rs' light_client_cost.
lc=$(cargo test --profile ${BENCH_PROFILE:-release} -q --lib light_client_cost -- --ignored --nocapture 2>/dev/null \
  | grep -o 'bootstrap_us=[0-9]* committee_update_us=[0-9]* update_us=[0-9]*' || echo "bootstrap_us=? committee_update_us=? update_us=?")
field() { echo "$lc" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
lc_bootstrap=$(field bootstrap_us); lc_committee=$(field committee_update_us); lc_update=$(field update_us)

publish RESULTS-verify.md <<MD
\`bench/verify.sh $secs\`: anvil block $number of $ntx transactions (transfers and calls
that log), response cache, coalescing and hedging off, oha at $conns connections for
${secs} s, median of $rounds interleaved rounds. Each cell: \`verify.mode: off\` / \`enforce\`.

| read | requests/s | p50 ms | p99 ms | node calls per request | edge CPU µs per request |
|---|---|---|---|---|---|
$rows
Beacon light client (\`rpc.verify.root.light_client\`), CPU of one core at mainnet's
committee size (512 keys, 500 signers): **$lc_bootstrap µs per bootstrap, $lc_update µs
per finality or optimistic update, $lc_committee µs per update bringing a new committee**
(its 512 keys checked; once a period, 27 hours on mainnet). Two updates a slot are
asked (12 s on mainnet). A read the light client
anchors needs no header vote: the signed head's block is the client's own, an older
one costs one batch of the headers up to the nearest trusted block, once.
MD
