#!/usr/bin/env bash
# WebSocket JSON-RPC memory and fan-out, loopback only: chainedge (terminating the
# WebSocket, shared subscriptions) against nginx proxying the same WebSocket to the same
# anvil node, in one run. Writes the table to stdout (paste into bench/RESULTS.md).
#
#   bench/ws.sh [clients, default 1000] [heads for the fan-out, default 200]
#
# Rows: RSS added per idle client (one call answered, then quiet); per client subscribed
# to newHeads (chainedge: one node subscription for all; nginx: a node connection and a
# node subscription each, the node's own memory not counted); heads delivered per second
# to all clients when the node makes `heads` blocks at once.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-1000}; heads=${2:-200}
command -v nginx >/dev/null || { echo "ws: needs nginx" >&2; exit 2; }
[ -x .venv/bin/python ] || bash scripts/setup.sh
py=.venv/bin/python
anvil=node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
bin=${BIN:-target/dist/chainedge}
[ -x "$bin" ] || cargo build --profile dist -q --bin chainedge
ulimit -n 65536 2>/dev/null || true
NODE=19301; NGX=19302; CE=19303; CEM=19304
work=$(mktemp -d /tmp/chainedge-ws.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT

# anvil's own HOME: the states it writes to ~/.foundry/anvil/tmp go with $work.
mkdir -p "$work/anvil-home"
HOME="$work/anvil-home" $anvil --port $NODE --silent >/dev/null 2>&1 &
pids+=($!)
wait_port $NODE
sleep 0.5
# A fresh chain is at height 0, which health checks treat as broken.
curl -s -o /dev/null -H 'Content-Type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"evm_mine","params":[]}' http://127.0.0.1:$NODE
cat > "$work/nginx.conf" <<NGINX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
  server {
    listen 127.0.0.1:$NGX;
    location / {
      proxy_pass http://127.0.0.1:$NODE;
      proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection \$connection_upgrade;
      proxy_read_timeout 3600s;
    }
  }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
mkdir -p "$work/plugins"; cp plugins/*.yaml "$work/plugins/"
cat > "$work/app.yaml" <<YAML
plugins: $work/plugins
listen:
  http: ["127.0.0.1:$CE"]
  max_connections: 20000
  max_connections_per_client: 20000
metrics:
  listen: "127.0.0.1:$CEM"
store:
  path: $work/store.db
plans: [free, basic, pro, business, enterprise, scale]
threads: 2
limits:
  default: {anonymous: 1000000, free: 1000000, basic: 1000000, pro: 1000000, business: 1000000, enterprise: 1000000, scale: 1000000}
streams:
  websocket:
    max_connections_per_key: {default: 100000}
    max_subscriptions_per_key: {default: 100000}
pools:
  eth_el:
    hosts:
      - {id: anvil, url: "http://127.0.0.1:$NODE", family: el-anvil, capabilities: [ws]}
YAML
pingora_yaml
tenant=$($bin --app "$work/app.yaml" tenants create --name bench --plan basic)
key=$($bin --app "$work/app.yaml" keys create --tenant "$tenant" 2>/dev/null)
# A fresh chainedge for each measurement, so one run's freed memory is not the next's.
start_ce() {
  # SIGINT: Pingora's fast shutdown (SIGTERM would wait out its 5-minute grace period).
  [ -z "${ce_pid:-}" ] || { kill -INT "$ce_pid"; wait "$ce_pid" 2>/dev/null || true; }
  $bin -c "$work/pingora.yaml" --app "$work/app.yaml" >/dev/null 2>>"$work/chainedge.log" &
  ce_pid=$!; pids+=($ce_pid)
  wait_port $CE
  sleep 1.5
}
start_ce
for p in $NODE $NGX $CE; do
  wait_port $p
done
sleep 1.5

rss_kib() { local t=0; for p in $1; do t=$((t + $(awk '/VmRSS/ {print $2}' /proc/$p/status))); done; echo $t; }
nginx_pids() { pgrep -f "nginx: worker process" | tr '\n' ' '; pgrep -f "nginx: master process nginx -c $work" | tr '\n' ' '; }
mine() { curl -s -o /dev/null -H 'Content-Type: application/json' \
  -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"anvil_mine\",\"params\":[\"0x$(printf %x "$1")\"]}" http://127.0.0.1:$NODE; }

# run NAME "PIDS" URL MODE [header]: KiB added per client while N are held (and, for
# subscribe, heads/s delivered to all clients after `heads` blocks at once).
run() {
  local name=$1 procs=$2 url=$3 mode=$4; shift 4
  local fifo="$work/fifo.$name"; mkfifo "$fifo"
  local before; before=$(rss_kib "$procs")
  $py bench/ws_clients.py "$url" "$n" "$mode" "$@" < "$fifo" > "$work/out.$name" 2>&1 &
  local client=$!
  exec 7>"$fifo"
  for _ in $(seq 600); do grep -q '^held' "$work/out.$name" && break; sleep 0.1; done
  grep -q '^held' "$work/out.$name" || { cat "$work/out.$name" >&2; exit 1; }
  sleep 1
  local after; after=$(rss_kib "$procs")
  local rate=""
  if [ "$mode" = subscribe ]; then
    mine "$heads"; sleep 4
  fi
  exec 7>&-
  wait $client || true
  if [ "$mode" = subscribe ]; then
    rate=$(awk -v want=$((n * heads)) '/^heads/ {printf "%d of %d, %.0f heads/s", $2, want, ($4 > 0 ? $2 / $4 : 0)}' "$work/out.$name")
  fi
  printf '%s|%s|%s\n' "$name" "$(awk -v a="$after" -v b="$before" -v n="$n" 'BEGIN {printf "%.1f", (a - b) / n}')" "$rate"
}

ce_idle=$(run ce_idle "$ce_pid" "ws://127.0.0.1:$CE/rpc/eth" idle "x-token: $key")
ngx_idle=$(run ngx_idle "$(nginx_pids)" "ws://127.0.0.1:$NGX/" idle)
start_ce
ce_sub=$(run ce_sub "$ce_pid" "ws://127.0.0.1:$CE/rpc/eth" subscribe "x-token: $key")
ngx_sub=$(run ngx_sub "$(nginx_pids)" "ws://127.0.0.1:$NGX/" subscribe)
col() { echo "$1" | cut -d'|' -f"$2"; }
publish RESULTS-ws.md <<MD
WebSocket JSON-RPC, $n clients, $(date -u +%Y-%m-%d) ($(basename "$bin"), 2 worker threads; nginx 2 workers):

| | chainedge (terminates, shared subscriptions) | nginx (proxies to the node) |
|---|---|---|
| RSS added per idle client | $(col "$ce_idle" 2) KiB | $(col "$ngx_idle" 2) KiB |
| RSS added per client subscribed to newHeads | $(col "$ce_sub" 2) KiB (one node subscription) | $(col "$ngx_sub" 2) KiB ($n node subscriptions, node memory not counted) |
| $heads heads at once to all clients | $(col "$ce_sub" 3) | $(col "$ngx_sub" 3) |
MD
