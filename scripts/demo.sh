#!/usr/bin/env bash
# `make demo`: the gateway in front of a local fleet, in the foreground.
#   edge     http://127.0.0.1:8080      metrics http://127.0.0.1:9091/metrics
#   eth_el   two anvil nodes (chain id 1) kept as one chain: writes are broadcast to both
#            by the gateway and this script mines both in step with identical timestamps
#   polygon  one anvil (137)            base  one anvil (8453)
# Seeds one API key per plan into .demo/keys.json and an admin token into .demo/admin-token;
# each node's pid goes to .demo/<host id>.pid (kill one to watch failover).
# Ctrl-C (SIGINT) or SIGTERM stops everything it started; a node dying stops nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
anvil="$root/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
bin="$root/target/release/chainedge"
demo="$root/.demo"

pids=()
cleanup() {
  trap - INT TERM EXIT
  echo "demo: stopping"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup INT TERM EXIT

rpc() { curl -s -m 2 -H 'content-type: application/json' -d "$2" "http://127.0.0.1:$1"; }
wait_port() {
  for _ in $(seq 1 100); do
    rpc "$1" '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "demo: node on port $1 did not start" >&2; return 1
}

for port in 8080 9091 18545 18546 18547 18548; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "demo: port $port is already in use; stop whatever holds it first" >&2; exit 1
  fi
done

mkdir -p "$demo"
rm -f "$demo"/chainedge.db* "$demo"/outbox.jsonl
umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$demo/admin-token"
export CHAINEDGE_ADMIN_TOKEN
CHAINEDGE_ADMIN_TOKEN=$(cat "$demo/admin-token")
# The key firehose tokens are signed with (kept in memory only).
export CHAINEDGE_FIREHOSE_SECRET
CHAINEDGE_FIREHOSE_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

genesis_ts=$(date +%s)
n=1
for port in 18545 18546; do
  "$anvil" --port "$port" --chain-id 1 --no-mining --timestamp "$genesis_ts" --silent &
  pids+=($!); echo $! > "$demo/el-anvil-$n.pid"; n=$((n + 1))
done
"$anvil" --port 18547 --chain-id 137 --block-time 2 --silent & pids+=($!); echo $! > "$demo/bor-anvil-1.pid"
"$anvil" --port 18548 --chain-id 8453 --block-time 2 --silent & pids+=($!); echo $! > "$demo/base-anvil-1.pid"
for port in 18545 18546 18547 18548; do wait_port "$port"; done

# One tenant and key per plan, through the admin CLI against the demo store.
app=(--app conf/demo.yaml)
{
  printf '{'
  sep=""
  for plan in free basic pro business enterprise scale; do
    tenant=$("$bin" "${app[@]}" tenants create --name "demo-$plan" --plan "$plan")
    key=$("$bin" "${app[@]}" keys create --tenant "$tenant" --name "demo-$plan" --scopes "rpc:read,rpc:write,sol_watchlist,sol_gpa_snapshot" 2>/dev/null)
    printf '%s"%s": "%s"' "$sep" "$plan" "$key"
    sep=", "
  done
  printf '}\n'
} > "$demo/keys.json"

# Health checks treat height 0 as broken: give every chain a first block now.
ts=$((genesis_ts + 1))
for port in 18545 18546; do
  rpc "$port" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"evm_mine\",\"params\":[$ts]}" >/dev/null
done
for port in 18547 18548; do
  rpc "$port" '{"jsonrpc":"2.0","id":1,"method":"anvil_mine","params":["0x1"]}' >/dev/null
done

# Mine both EL nodes in step: same block, same timestamp, same transactions.
(
  while true; do
    sleep 2
    ts=$((ts + 2))
    for port in 18545 18546; do
      rpc "$port" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"evm_mine\",\"params\":[$ts]}" >/dev/null || true
    done
  done
) &
pids+=($!)

"$bin" -c conf/pingora-demo.yaml "${app[@]}" &
gateway=$!
pids+=($gateway)

# Tokens deployed on both chains and a steady flow of transfers (docs/index.md).
python3 scripts/demo_flow.py 18545,18546 18547 &
pids+=($!)

cat <<MSG
demo: chainedge is up
  JSON-RPC   curl -s -H 'content-type: application/json' -H "Authorization: Bearer \$(python3 -c 'import json;print(json.load(open(".demo/keys.json"))["free"])')" \\
               -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' http://127.0.0.1:8080/rpc/eth
  balance    curl -s http://127.0.0.1:8080/v1/polygon/wallet/balance/0x00000000000000000000000000000000000a11ce
  history    curl -s -H "x-token: \$(python3 -c 'import json;print(json.load(open(".demo/keys.json"))["basic"])')" \\
               'http://127.0.0.1:8080/v1/eth/wallet/0x00000000000000000000000000000000000a11ce/history?limit=5'
  tokens     (same key) http://127.0.0.1:8080/v1/eth/wallet/0x00000000000000000000000000000000000a11ce/tokens
  NFTs       (same key) http://127.0.0.1:8080/v1/polygon/wallet/nfts/0x00000000000000000000000000000000000a11ce
  mesh       curl -s http://127.0.0.1:8080/v1/eth/mesh/health
  metrics    curl -s http://127.0.0.1:9091/metrics
  console    http://127.0.0.1:8080/console/   (sign-in codes: .demo/outbox.jsonl)
  keys       .demo/keys.json   admin token  .demo/admin-token
  failover   kill \$(cat .demo/el-anvil-2.pid)   then watch the mesh quarantine it while /rpc/eth answers
             (kill -STOP / -CONT freezes and thaws a node instead)
Ctrl-C stops everything.
MSG
# Only the gateway's end ends the demo: a node killed to try failover does not.
wait "$gateway" || true
