#!/usr/bin/env bash
# The cost of following transactions on the write path (issue 40): one anvil node
# (no mining: every send only enters its pool), and in the same run
#   (w0) eth_sendRawTransaction straight to the node,
#   (w1) through chainedge /rpc/eth with tx_tracking off,
#   (w2) through chainedge /rpc/eth with tx_tracking on, its follower idle (a round a
#        minute): what recording costs the write path itself,
#   (w3) the same with the follower at its default (a round every 2 s over the open
#        transactions, which here never land): the write path beside the background
#        work on the same 2 cores,
# one client sending N distinct signed transactions to each (a different dev account per
# path, so each path has its own nonces), interleaved in a random order per round so
# drift hits every path alike. Latency of each send, p50 / p99 / mean; the ratios
# (w2)/(w1) and (w3)/(w1) are what following costs. Writes bench/RESULTS-write.md.
#
#   bench/write.sh [transactions per path, default 1000]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-1000}
cargo build --profile ${BENCH_PROFILE:-dist} -q --bin chainedge
bin=target/${BENCH_PROFILE:-dist}/chainedge
[ "${BENCH_PROFILE:-dist}" = dev ] && bin=target/debug/chainedge
anvil=node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
[ -x "$anvil" ] || bash scripts/setup.sh

work=$(mktemp -d /tmp/chainedge-writebench.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
NODE=19301; OFF=19302; OFFM=19303; ON=19304; ONM=19305; BG=19306; BGM=19307
ports_free $NODE $OFF $OFFM $ON $ONM $BG $BGM

# anvil's own HOME: the states it writes to ~/.foundry/anvil/tmp go with $work.
mkdir -p "$work/anvil-home"
HOME="$work/anvil-home" "$anvil" --port $NODE --chain-id 1 --no-mining --silent >/dev/null 2>&1 &
pids+=($!)
until curl -s -o /dev/null -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' http://127.0.0.1:$NODE; do sleep 0.1; done
# A chain at height 0 is what health checks call broken.
curl -s -o /dev/null -H 'content-type: application/json' -d '{"jsonrpc":"2.0","id":1,"method":"evm_mine","params":[]}' http://127.0.0.1:$NODE

edge() { # name port metrics-port tracking(true|false) follow-interval-ms
  cat > "$work/$1.yaml" <<YAML
plugins: $PWD/plugins
listen:
  http: ["127.0.0.1:$2"]
metrics:
  listen: "127.0.0.1:$3"
store:
  path: $work/$1.db
plans: [free, basic, pro, business, enterprise, scale]
threads: 2
limits:
  default: {anonymous: 10000000, free: 10000000, basic: 10000000, pro: 10000000, business: 10000000, enterprise: 10000000, scale: 10000000}
health:
  interval_ms: 500
tx_tracking:
  enabled: $4
  follow_interval_ms: $5
pools:
  eth_el:
    hosts:
      - {id: anvil, url: "http://127.0.0.1:$NODE", family: el-anvil}
YAML
  cat > "$work/$1-pingora.yaml" <<YAML
version: 1
threads: 2
pid_file: $work/$1.pid
upgrade_sock: $work/$1-upgrade.sock
YAML
  local tenant
  tenant=$($bin --app "$work/$1.yaml" tenants create --name bench --plan scale)
  $bin --app "$work/$1.yaml" keys create --tenant "$tenant" --scopes "rpc:read,rpc:write" 2>/dev/null > "$work/$1.key"
  $bin -c "$work/$1-pingora.yaml" --app "$work/$1.yaml" >/dev/null 2>"$work/$1.log" &
  pids+=($!)
  until curl -sf -o /dev/null "http://127.0.0.1:$3/metrics"; do sleep 0.1; done
}
edge off $OFF $OFFM false 2000
edge on $ON $ONM true 60000
edge bg $BG $BGM true 2000
sleep 1

python3 - "$n" "$NODE" "$OFF" "$(cat "$work/off.key")" "$ON" "$(cat "$work/on.key")" "$BG" "$(cat "$work/bg.key")" > "$work/result.json" <<'PY'
import http.client, json, random, statistics, sys, time
n, node, off, off_key, on, on_key, bg, bg_key = int(sys.argv[1]), *sys.argv[2:]

def connection(port):
    return http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)

def call(conn, path, body, headers):
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **headers})
    r = conn.getresponse()
    return json.loads(r.read())

signer = connection(node)
accounts = call(signer, "/", {"jsonrpc": "2.0", "id": 1, "method": "eth_accounts", "params": []}, {})["result"]
paths = {
    "direct": (node, "/", {}, accounts[2]),
    "off": (off, "/rpc/eth", {"x-token": off_key}, accounts[3]),
    "on": (on, "/rpc/eth", {"x-token": on_key}, accounts[4]),
    "bg": (bg, "/rpc/eth", {"x-token": bg_key}, accounts[5]),
}
signed = {}
for name, (_, _, _, sender) in paths.items():
    signed[name] = []
    for nonce in range(n):
        tx = {"from": sender, "to": "0x000000000000000000000000000000000000dEaD", "value": "0x1",
              "gas": "0x5208", "gasPrice": "0x77359400", "nonce": hex(nonce), "chainId": "0x1"}
        signed[name].append(call(signer, "/", {"jsonrpc": "2.0", "id": 1, "method": "eth_signTransaction", "params": [tx]}, {})["result"])
conns = {name: connection(port) for name, (port, _, _, _) in paths.items()}
took = {name: [] for name in paths}
order = list(paths)
for i in range(n):
    random.shuffle(order)
    for name in order:
        _, path, headers, _ = paths[name]
        body = {"jsonrpc": "2.0", "id": i, "method": "eth_sendRawTransaction", "params": [signed[name][i]]}
        t = time.perf_counter()
        answer = call(conns[name], path, body, headers)
        took[name].append((time.perf_counter() - t) * 1000)
        assert "result" in answer, (name, answer)
out = {}
for name, ms in took.items():
    ms.sort()
    out[name] = {"p50": ms[len(ms) // 2], "p99": ms[int(len(ms) * 0.99)], "mean": statistics.mean(ms)}
print(json.dumps(out))
PY
dropped=$(curl -s "http://127.0.0.1:$ONM/metrics" "http://127.0.0.1:$BGM/metrics" | awk '/^chainedge_tx_tracking_dropped_total/ {s += $2} END {print s + 0}')

read -r d50 d99 dm f50 f99 fm t50 t99 tm b50 b99 bm < <(python3 -c '
import json,sys; r=json.load(open(sys.argv[1]))
print(*["%.3f" % r[k][m] for k in ("direct","off","on","bg") for m in ("p50","p99","mean")])' "$work/result.json")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
publish RESULTS-write.md <<MD
# Write path with and without transaction following ($(date -u +%Y-%m-%d), \`bench/write.sh $n\`)

$n distinct signed transactions per path from one client, one at a time, the four paths
interleaved in a random order each round; anvil without mining (each send only enters
its pool); ${BENCH_PROFILE:-dist} build, 2 worker threads, $(nproc) cores shared with the node.

| path | p50 ms | p99 ms | mean ms | p50 / tracking off | p99 / tracking off |
|---|---|---|---|---|---|
| (w0) straight to the node | $d50 | $d99 | $dm | $(ratio "$d50" "$f50") | $(ratio "$d99" "$f99") |
| (w1) chainedge, tx_tracking off | $f50 | $f99 | $fm | 1.000 | 1.000 |
| (w2) chainedge, tx_tracking on, follower idle | $t50 | $t99 | $tm | $(ratio "$t50" "$f50") | $(ratio "$t99" "$f99") |
| (w3) chainedge, tx_tracking on, follower every 2 s | $b50 | $b99 | $bm | $(ratio "$b50" "$f50") | $(ratio "$b99" "$f99") |

Records dropped by a full tracking queue: $dropped. (w3)'s follower looks at up to 200
open transactions per round, none of which ever lands here: the node and the edge share
the box's 2 cores with that work.
MD
