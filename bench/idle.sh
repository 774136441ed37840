#!/usr/bin/env bash
# What an idle keep-alive client connection costs in memory, without bench/run.sh's
# `dist` build and throughput rows: chainedge (BIN, default the release build) and nginx
# proxying the same static node, N connections (default 10,000) each after one keyed
# beacon passthrough request (chainedge) or the same request proxied (nginx), held idle,
# RSS read 2 s after the last answer; then the same again once those closed (the steady
# state, when the allocator already holds what the first requests passed through).
# `BASELINE=/path/to/chainedge` measures an earlier build the same way after it;
# `WRAP="heaptrack -o FILE"` runs the edge under a tool; `KEEP_LOG=1` keeps each edge's
# stderr as /tmp/idle-NAME.log.
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

nginx_static_node
nginx_reference_proxy
nginx -c "$work/upstream.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
pids+=($!)

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
  first=$(held_kib "$pid" $CE /rpc/eth-beacon/eth/v1/node/version "$n" "x-token: $key")
  sleep 2
  second=$(held_kib "$pid" $CE /rpc/eth-beacon/eth/v1/node/version "$n" "x-token: $key")
  echo "$name: idle $first KiB ($(per_conn "$first") each), again $second KiB ($(per_conn "$second") each), VmHWM $(hwm_kib "$pid") KiB, RSS $(rss_kib "$pid") KiB"
  [ -n "${KEEP_LOG:-}" ] && cp "$work/$name.log" /tmp/idle-$name.log
  stop_last
}

measure edge "$bin"
[ -n "${BASELINE:-}" ] && measure base "$BASELINE"
first=$(held_kib "$(nginx_pids nginx)" $NGX /eth/v1/node/version "$n")
sleep 2
second=$(held_kib "$(nginx_pids nginx)" $NGX /eth/v1/node/version "$n")
echo "nginx: idle $first KiB ($(per_conn "$first") each), again $second KiB ($(per_conn "$second") each)"
