#!/usr/bin/env bash
# `make demo`: the gateway in front of a local fleet, in the foreground.
#   edge     http://127.0.0.1:8080      metrics http://127.0.0.1:9091/metrics
#   eth_el   two anvil nodes (chain id 1) kept as one chain: writes are broadcast to both
#            by the gateway and this script mines both in step with identical timestamps
#   polygon  one anvil (137)            base  one anvil (8453)
#   solana   the LiteSVM node (tests/standins/sol_node.py) with its Jito-style block engine
#   and stand-ins for every other upstream (tests/standins/fleet.py, each held to its
#   system's official spec): beacon node, heimdall-v2 (LCD + CometBFT RPC), relay data
#   API, builder, private RPC, MEV-Share, Solana MEV-cache hosts, and geth fronts
#   (admin_* and metrics) before both EL anvils
# Seeds one API key per plan into .demo/keys.json and an admin token into .demo/admin-token;
# each node's pid goes to .demo/<host id>.pid (kill one to watch failover).
# Ctrl-C (SIGINT) or SIGTERM stops everything it started; a node dying stops nothing.
#
# Where it runs is a parameter, so a second demo (the tests run one) never touches the
# first: DEMO_DIR (state, default .demo), DEMO_EDGE_PORT (8080), DEMO_METRICS_PORT
# (9091) and DEMO_NODE_PORT (18545: the nodes and stand-ins take it and the next 18). The
# configuration it runs is conf/demo.yaml and conf/pingora-demo.yaml with those put in,
# written to DEMO_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
anvil="$root/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
bin="$root/target/release/chainedge"
demo=$(mkdir -p "${DEMO_DIR:-$root/.demo}" && cd "${DEMO_DIR:-$root/.demo}" && pwd)
edge_port=${DEMO_EDGE_PORT:-8080}
metrics_port=${DEMO_METRICS_PORT:-9091}
node_port=${DEMO_NODE_PORT:-18545}
if ! [[ "$node_port" =~ ^[0-9]+$ ]] || [ "$node_port" -lt 1024 ] || [ $((node_port + 18)) -gt 65535 ]; then
  echo "demo: DEMO_NODE_PORT=$node_port: give a port from 1024 to 65517 (the nodes take it and the next 18)" >&2; exit 1
fi
el1=$node_port el2=$((node_port + 1)) bor=$((node_port + 2)) base=$((node_port + 3))
sol=$((node_port + 4)) sol_ws=$((node_port + 5))
py="$root/.venv/bin/python"
[ -x "$py" ] || py=python3
edge="http://127.0.0.1:$edge_port"

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

# The nodes' 19 ports must lie outside the kernel's ephemeral range: every client socket
# on this machine (the edge's own connections to the nodes included) takes its local
# port from there, and one that lands on a node's port before the node binds it makes
# that node fail to start.
read -r eph_low eph_high < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || { eph_low=32768; eph_high=60999; }
if [ $((node_port + 18)) -ge "$eph_low" ] && [ "$node_port" -le "$eph_high" ]; then
  echo "demo: DEMO_NODE_PORT=$node_port: ports $node_port-$((node_port + 18)) overlap the kernel's ephemeral range ($eph_low-$eph_high), where client sockets take their ports and would collide with the nodes'; pick a start below $((eph_low - 18)) (the default is 18545)" >&2
  exit 1
fi
for port in "$edge_port" "$metrics_port" $(seq "$node_port" $((node_port + 18))); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "demo: port $port is already in use; stop whatever holds it first" >&2; exit 1
  fi
done

rm -rf "$demo"/chainedge.db* "$demo"/outbox.jsonl "$demo"/usage-journal "$demo"/anvil-home
# The nodes' own HOME: anvil keeps the states it cannot hold in memory under
# ~/.foundry/anvil/tmp and leaves them there when stopped; here they go with the demo.
mkdir -p "$demo/anvil-home"
umask 077
# The demo's configuration with this run's ports and state directory.
# Node ports 18545..18563 move by one offset, in one pass (so none is moved twice).
python3 -c 'import re,sys; off=int(sys.argv[1]) - 18545
print(re.sub(r"127\.0\.0\.1:(185[4-6][0-9])", lambda m: "127.0.0.1:%d" % (int(m.group(1)) + off), sys.stdin.read()), end="")' \
  "$node_port" < conf/demo.yaml |
  sed -e "s|127.0.0.1:8080|127.0.0.1:$edge_port|g" -e "s|127.0.0.1:9091|127.0.0.1:$metrics_port|g" \
    -e "s|\.\./\.demo/|$demo/|g" -e "s|^plugins: \.\./plugins|plugins: $root/plugins|" \
    > "$demo/demo.yaml"
sed -e "s|^pid_file: .*|pid_file: $demo/chainedge.pid|" \
    -e "s|^upgrade_sock: .*|upgrade_sock: $demo/upgrade.sock|" \
    conf/pingora-demo.yaml > "$demo/pingora.yaml"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$demo/admin-token"
export CHAINEDGE_ADMIN_TOKEN
CHAINEDGE_ADMIN_TOKEN=$(cat "$demo/admin-token")
# The key firehose tokens are signed with (kept in memory only).
export CHAINEDGE_FIREHOSE_SECRET
CHAINEDGE_FIREHOSE_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The keys watchlist and transaction webhooks are signed with, likewise.
export CHAINEDGE_WATCHLIST_SECRET CHAINEDGE_TX_HOOK_SECRET
CHAINEDGE_WATCHLIST_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
CHAINEDGE_TX_HOOK_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# The demo's HTTPS webhook receiver: its own certificate for 127.0.0.1, which the
# gateway's webhook client trusts (conf/demo.yaml's webhook ca_file).
openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$demo/webhook-key.pem" -out "$demo/webhook-cert.pem" 2>/dev/null
rm -f "$demo/webhooks.jsonl"

genesis_ts=$(date +%s)
n=1
for port in "$el1" "$el2"; do
  HOME="$demo/anvil-home" "$anvil" --port "$port" --chain-id 1 --no-mining --timestamp "$genesis_ts" --silent &
  pids+=($!); echo $! > "$demo/el-anvil-$n.pid"; n=$((n + 1))
done
HOME="$demo/anvil-home" "$anvil" --port "$bor" --chain-id 137 --block-time 2 --silent & pids+=($!); echo $! > "$demo/bor-anvil-1.pid"
HOME="$demo/anvil-home" "$anvil" --port "$base" --chain-id 8453 --block-time 2 --silent & pids+=($!); echo $! > "$demo/base-anvil-1.pid"
for port in "$el1" "$el2" "$bor" "$base"; do wait_port "$port"; done

# Solana: LiteSVM behind the real JSON-RPC, PubSub and a block engine (slots every 400 ms).
"$py" tests/standins/sol_node.py --port "$sol" --ws-port "$sol_ws" --slot-ms 400 --slots-per-epoch 432 &
pids+=($!); echo $! > "$demo/sol-litesvm-1.pid"
# Every other upstream's stand-in, on the next ports in conf/demo.yaml's order.
names=(beacon heimdall-lcd heimdall-rpc relay builder private-rpc mev-share mev-cache-1 mev-cache-2 front-el-1 front-el-2 front-bor webhooks)
args=()
for i in "${!names[@]}"; do args+=(--port "${names[$i]}=$((node_port + 6 + i))"); done
"$py" tests/standins/fleet.py "${args[@]}" --node "el-1=http://127.0.0.1:$el1" \
  --node "el-2=http://127.0.0.1:$el2" --node "bor=http://127.0.0.1:$bor" --mev-share-idle-secs 3 \
  --tls "$demo/webhook-cert.pem,$demo/webhook-key.pem" --webhook-log "$demo/webhooks.jsonl" &
pids+=($!); echo $! > "$demo/standins.pid"
for _ in $(seq 1 100); do
  curl -s -m 1 -o /dev/null "http://127.0.0.1:$((node_port + 6))/eth/v1/node/syncing" &&
    rpc "$sol" '{"jsonrpc":"2.0","id":1,"method":"getHealth"}' >/dev/null 2>&1 && break
  sleep 0.1
done
# Proven reads (eth_getBalance and the rest, complete logs) rooted by the beacon light
# client (docs/verification.md#light-client): its checkpoint is the beacon stand-in's
# first block and its chain's constants the stand-in's, written into this run's config.
# A real deployment takes a recent finalized root from a source it trusts.
"$py" - "$demo/demo.yaml" "http://127.0.0.1:$((node_port + 6))" <<'PY'
import json, sys, time, urllib.request
import yaml
path, beacon = sys.argv[1], sys.argv[2]
for _ in range(50):
    try:
        cp = json.load(urllib.request.urlopen(beacon + "/standin/light_client/checkpoint", timeout=2))
        break
    except Exception:
        time.sleep(0.2)
else:
    sys.exit("demo: the beacon stand-in has no light-client checkpoint")
conf = yaml.safe_load(open(path))
conf.setdefault("rpc", {})["verify"] = {"root": {"ask": 2, "light_client": {
    "pool": "eth_el", "beacon": "eth_cl", "checkpoint": cp["root"], "network": cp["network"]}}}
yaml.safe_dump(conf, open(path, "w"), sort_keys=False)
PY
# A Solana chain state made of real transactions: a wallet with SOL, SPL and Token-2022
# balances and an NFT, two vote accounts and four delegated stake accounts. Its public
# addresses go to sol.json (the keypairs are not kept).
"$py" tests/py/sol_client.py fixture "http://127.0.0.1:$sol" |
  python3 -c 'import json,sys; print(json.dumps({k: v for k, v in json.load(sys.stdin).items() if not k.endswith("_secret")}))' \
  > "$demo/sol.json"

# One tenant and key per plan, through the admin CLI against the demo store.
app=(--app "$demo/demo.yaml")
{
  printf '{'
  sep=""
  for plan in free basic pro business enterprise scale; do
    tenant=$("$bin" "${app[@]}" tenants create --name "demo-$plan" --plan "$plan")
    key=$("$bin" "${app[@]}" keys create --tenant "$tenant" --name "demo-$plan" --scopes "rpc:read,rpc:write,sol_watchlist,sol_gpa_snapshot" 2>/dev/null)
    # The chain metrics mirror is a feature; the top plans have it in the demo.
    case $plan in enterprise|scale)
      "$bin" "${app[@]}" tenants set-features --tenant "$tenant" --features eth.chain_metrics_el,eth.chain_metrics_cl ;;
    esac
    printf '%s"%s": "%s"' "$sep" "$plan" "$key"
    sep=", "
  done
  printf '}\n'
} > "$demo/keys.json"

# Health checks treat height 0 as broken: give every chain a first block now.
ts=$((genesis_ts + 1))
for port in "$el1" "$el2"; do
  rpc "$port" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"evm_mine\",\"params\":[$ts]}" >/dev/null
done
for port in "$bor" "$base"; do
  rpc "$port" '{"jsonrpc":"2.0","id":1,"method":"anvil_mine","params":["0x1"]}' >/dev/null
done

# Mine both EL nodes in step: same block, same timestamp, same transactions.
(
  while true; do
    sleep 2
    ts=$((ts + 2))
    for port in "$el1" "$el2"; do
      rpc "$port" "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"evm_mine\",\"params\":[$ts]}" >/dev/null || true
    done
  done
) &
pids+=($!)

"$bin" -c "$demo/pingora.yaml" "${app[@]}" &
gateway=$!
pids+=($gateway)
echo "$gateway" > "$demo/chainedge.pid"
echo $$ > "$demo/demo.pid"

# A graceful upgrade of the demo's gateway (a new build, a change a reload cannot
# apply): `kill -USR1 $(cat .demo/demo.pid)`. The new process starts with -u and waits
# on upgrade_sock, the old one hands its listeners over and drains (SIGQUIT), and the
# fleet stays up: the same steps as scripts/upgrade.sh, in the shell that holds the
# demo's secrets.
upgrade() {
  rm -f "$demo/upgrade.sock"
  "$bin" -u -c "$demo/pingora.yaml" "${app[@]}" &
  local next=$!
  for _ in $(seq 1 100); do [ -S "$demo/upgrade.sock" ] && break; sleep 0.1; done
  if ! kill -0 "$next" 2>/dev/null; then
    echo "demo: the new chainedge did not start; $gateway keeps serving" >&2; return
  fi
  kill -QUIT "$gateway" 2>/dev/null || true
  echo "demo: chainedge upgraded (pid $gateway -> $next); the fleet stays up"
  gateway=$next
  pids+=($next)
  echo "$gateway" > "$demo/chainedge.pid"
}
trap upgrade USR1

# Tokens deployed on both chains and a steady flow of transfers (docs/index.md).
python3 scripts/demo_flow.py "$el1,$el2" "$bor" &
pids+=($!)

cat <<MSG
demo: chainedge is up
  JSON-RPC   curl -s -H 'content-type: application/json' -H "Authorization: Bearer \$(python3 -c 'import json;print(json.load(open("$demo/keys.json"))["free"])')" \\
               -d '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}' $edge/rpc/eth
  balance    curl -s $edge/v1/polygon/wallet/balance/0x00000000000000000000000000000000000a11ce
  history    curl -s -H "x-token: \$(python3 -c 'import json;print(json.load(open("$demo/keys.json"))["basic"])')" \\
               '$edge/v1/eth/wallet/0x00000000000000000000000000000000000a11ce/history?limit=5'
  tokens     (same key) $edge/v1/eth/wallet/0x00000000000000000000000000000000000a11ce/tokens
  NFTs       (same key) $edge/v1/polygon/wallet/nfts/0x00000000000000000000000000000000000a11ce
  mesh       curl -s $edge/v1/eth/mesh/health
  metrics    curl -s http://127.0.0.1:$metrics_port/metrics
  console    $edge/console/   (sign-in codes: $demo/outbox.jsonl)
  keys       $demo/keys.json   admin token  $demo/admin-token
  failover   kill \$(cat $demo/el-anvil-2.pid)   then watch the mesh quarantine it while /rpc/eth answers
             (kill -STOP / -CONT freezes and thaws a node instead)
  upgrade    kill -USR1 \$(cat $demo/demo.pid)   hands the listeners to a new chainedge (-u), fleet kept
  reload     kill -HUP \$(cat $demo/chainedge.pid)
Ctrl-C stops everything.
MSG
# Only the gateway's end ends the demo: a node killed to try failover does not, and a
# graceful upgrade (USR1, above) hands over to the new process, which the demo then
# waits on.
while kill -0 "$gateway" 2>/dev/null; do wait "$gateway" || true; done
