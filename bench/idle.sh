#!/usr/bin/env bash
# What an idle keep-alive client connection costs in memory, without bench/run.sh's
# `dist` build and throughput rows: chainedge (BIN, default the release build) and nginx
# proxying the same static node, N connections (default 10,000) each after one keyed
# beacon passthrough request (chainedge) or the same request proxied (nginx), held idle,
# RSS read 2 s after the last answer; then the same again once those closed (the steady
# state, when the allocator already holds what the first requests passed through).
# `BASELINE=/path/to/chainedge` measures an earlier build the same way, alternating.
#
#   bench/idle.sh [BIN] [N]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bin=${1:-target/release/chainedge}; n=${2:-10000}
UP=19311; NGX=19312; CE=19313; CEM=19314
ports_free $UP $NGX $CE $CEM
work=$(mktemp -d /tmp/chainedge-idle.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
workers=2; nofile=$(ulimit -n)

# The static node, answering the beacon health probe as a synced node.
nginx_conf upstream <<NGINX
http {
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$UP backlog=4096;
    access_log off;
    default_type application/json;
    location = /eth/v1/node/syncing { return 200 '{"data":{"head_slot":"100","sync_distance":"0","is_syncing":false}}'; }
    location / { return 200 '{"jsonrpc":"2.0","id":1,"result":"0x1"}'; }
  }
}
NGINX
nginx_reference_proxy
nginx -c "$work/upstream.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
pids+=($!)

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
hwm_kib() { awk '/VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
nginx_pids() { local m; m=$(cat "$work/$1.pid"); echo "$m $(pgrep -P "$m" | tr '\n' ' ')"; }
sum_kib() { local f=$1 total=0; shift; for p in "$@"; do total=$((total + $($f "$p"))); done; echo $total; }

# held_kib "PIDS" PORT PATH [headers]: KiB of RSS added while N connections are held.
held_kib() {
  local pids_=$1 port=$2 path=$3; shift 3
  local before after fifo=$work/hold.$port
  # shellcheck disable=SC2086
  before=$(sum_kib rss_kib $pids_)
  mkfifo "$fifo"
  python3 bench/hold_conns.py "$port" "$path" "$n" "$@" < "$fifo" > "$work/held.$port" 2>&1 &
  local holder=$!
  exec 7>"$fifo"
  for _ in $(seq 1 600); do grep -q '^held' "$work/held.$port" 2>/dev/null && break; ! kill -0 $holder 2>/dev/null && break; sleep 0.1; done
  sleep 2
  # shellcheck disable=SC2086
  after=$(sum_kib rss_kib $pids_)
  local held; held=$(awk '/^held/ {print $2}' "$work/held.$port")
  exec 7>&-
  wait $holder 2>/dev/null || true
  rm -f "$fifo"
  if [ "${held:-0}" = "$n" ]; then echo $((after - before)); else echo "n/a($(tail -1 "$work/held.$port"))"; fi
}
per_conn() { awk -v k="$1" -v n="$n" 'BEGIN{ if (k ~ /^-?[0-9]+$/) printf "%.2f", k/n; else print "n/a" }'; }

# measure NAME BIN: one edge (its own store and key), its two idle rows and peak RSS.
measure() {
  local name=$1 b=$2
  edge_app "$name" $CE $CEM <<YAML
health:
  interval_ms: 5000
pools:
  eth_cl:
    hosts:
      - {id: static-cl, url: "http://127.0.0.1:$UP", family: cl-lighthouse}
YAML
  # Every held connection comes from this one address.
  sed -i "/^  http: /a\\  max_connections: $((n * 2))\\n  max_connections_per_client: $((n * 2))" "$work/$name.yaml"
  edge_pingora "$name"
  local tenant key
  tenant=$("$b" --app "$work/$name.yaml" tenants create --name idle --plan basic)
  key=$("$b" --app "$work/$name.yaml" keys create --tenant "$tenant" 2>/dev/null)
  MIMALLOC_ARENA_EAGER_COMMIT=0 ${WRAP:-} "$b" -c "$work/$name-pingora.yaml" --app "$work/$name.yaml" >/dev/null 2>"$work/$name.log" &
  local pid=$!
  pids+=($pid)
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$CE/console/" && break; sleep 0.1; done
  local first second
  first=$(held_kib "$pid" $CE /rpc/eth-beacon/eth/v1/node/version "x-token: $key")
  sleep 2
  second=$(held_kib "$pid" $CE /rpc/eth-beacon/eth/v1/node/version "x-token: $key")
  echo "$name: idle $first KiB ($(per_conn "$first") each), again $second KiB ($(per_conn "$second") each), VmHWM $(hwm_kib "$pid") KiB, RSS $(rss_kib "$pid") KiB"
  [ -n "${KEEP_LOG:-}" ] && cp "$work/$name.log" /tmp/idle-$name.log
  stop_last
}

measure edge "$bin"
[ -n "${BASELINE:-}" ] && measure base "$BASELINE"
first=$(held_kib "$(nginx_pids nginx)" $NGX /eth/v1/node/version)
sleep 2
second=$(held_kib "$(nginx_pids nginx)" $NGX /eth/v1/node/version)
echo "nginx: idle $first KiB ($(per_conn "$first") each), again $second KiB ($(per_conn "$second") each)"
