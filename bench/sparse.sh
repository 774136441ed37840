#!/usr/bin/env bash
# The chain index on a sparse chain, loopback only: most blocks empty, one in `every`
# with transfers. In one run: the node alone serving every header in batches of 1000
# (the least any indexer must read), then the indexer's backfill of the same chain.
#
#   bench/sparse.sh [blocks, default 20000] [every, default 100]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
blocks=${1:-20000}
every=${2:-100}
anvil=node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
[ -x "$anvil" ] || bash scripts/setup.sh
cargo build --release -q --bin chainedge
bin=target/release/chainedge
NODE=19411; CE=19412; CEM=19413
work=$(mktemp -d /tmp/chainedge-sparse-bench.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT

# No historical states: 20,000 blocks of them fill gigabytes of ~/.foundry/anvil/tmp.
$anvil --port $NODE --no-mining --prune-history --silent >/dev/null 2>&1 &
pids+=($!)
wait_port $NODE
sleep 0.5

# The chain, then the node alone reading every header (the same batches the indexer asks).
node_secs=$(python3 - "$NODE" "$blocks" "$every" <<'PY'
import json, sys, time, urllib.request
sys.path.insert(0, "scripts")
from demo_flow import DEV
port, blocks, every = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def call(body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}", json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)
made = 0
while made < blocks:
    to = "0x" + format(0xB000 + made % 500, "040x")
    call([{"jsonrpc": "2.0", "id": 1, "method": "eth_sendTransaction", "params": [{"from": DEV, "to": to, "value": hex(made + 1)}]},
          {"jsonrpc": "2.0", "id": 2, "method": "evm_mine", "params": []},
          {"jsonrpc": "2.0", "id": 3, "method": "anvil_mine", "params": [hex(min(every, blocks - made) - 1)]}])
    made += every
head = int(call({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []})["result"], 16)
start = time.time()
for lo in range(0, head + 1, 1000):
    batch = [{"jsonrpc": "2.0", "id": n, "method": "eth_getBlockByNumber", "params": [hex(n), False]}
             for n in range(lo, min(head, lo + 999) + 1)]
    assert all("result" in a for a in call(batch))
print(f"{time.time() - start:.2f}")
PY
)
head=$(curl -s -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' http://127.0.0.1:$NODE | python3 -c 'import json,sys;print(int(json.load(sys.stdin)["result"],16))')

index_app_yaml "  path: $work/store.db"
pingora_yaml
$bin -c "$work/pingora.yaml" --app "$work/app.yaml" >/dev/null 2>"$work/chainedge.log" &
pids+=($!)
# Timed from its first commit, as bench/index.sh: the process's start-up is not the
# indexer's pace (it was half of a one-second run).
read -r timed_blocks secs _ <<<"$(python3 bench/backfill_watch.py $CEM "$head" "${pids[-1]}" "${pids[0]}")"
transfers=$(curl -s "http://127.0.0.1:$CEM/metrics" | awk '/^chainedge_index_transfers_total\{chain="eth"\}/ {print $2}')

rate() { awk -v n="$1" -v s="$2" 'BEGIN{printf "%.0f", n/s}'; }
publish "RESULTS-sparse.md" <<MD
# Chain index on a sparse chain ($(date -u +%Y-%m-%d), \`bench/sparse.sh $blocks $every\`, SQLite)

Chain: $head blocks on one anvil, one native transfer every $every blocks, the rest empty;
release build, 2 worker threads, $(nproc) cores shared with the node. The index starts
at block 0; its time runs from the first block it is seen to have committed (start-up and
first window left out) until \`chainedge_index_head\` reaches the node's head.

| row | time | blocks/s | against the node |
|---|---|---|---|
| node alone: every header, 1000 per batch | ${node_secs} s for $head blocks | $(rate "$head" "$node_secs") | 1.000 |
| indexer backfill ($transfers transfers) | ${secs} s for $timed_blocks blocks | $(rate "$timed_blocks" "$secs") | $(awk -v n="$head" -v a="$node_secs" -v m="$timed_blocks" -v b="$secs" 'BEGIN{printf "%.3f", (m/b)/(n/a)}') |
MD
