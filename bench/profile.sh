#!/usr/bin/env bash
# What one request costs, counted rather than timed: instructions (callgrind), heap
# allocations (calls into the Rust allocator, from the same callgrind run) and syscalls
# (strace, a run of its own, not under valgrind) per request, for chainedge's plain
# passthrough, a cache hit and a distinct read (the gateway path: key, limits, method
# table, parse, cache miss, node call, usage, request log), and nginx proxying the same
# distinct reads. Counts do not move with what else the box is doing, so a change's cost
# shows where wrk's ±5% would hide it. Loopback only.
#
#   bench/profile.sh [BIN, default target/release/chainedge] [requests, default 5000]
#   TOP=40 bench/profile.sh ...   how many functions each route's profile lists
#   CACHE=1 bench/profile.sh ...  callgrind's cache model on: first-level instruction-
#                                 and data-cache misses per request as two more columns
#                                 (about twice as slow)
#   CONNS=64 bench/profile.sh ... connections the load uses (default 4); more spread a
#                                 request's state over more memory, as the rate benches do
#
# Writes bench/RESULTS-profile.md (the table) and, per route, the functions with the most
# inclusive instructions to $PROFILE_DIR (default target/profile/) with the raw
# callgrind files, for callgrind_annotate or kcachegrind.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bin=${1:-target/release/chainedge}; n=${2:-5000}; top=${TOP:-40}
out=${PROFILE_DIR:-target/profile}
for tool in valgrind callgrind_annotate strace nginx oha curl python3; do
  command -v $tool >/dev/null || { echo "profile: needs $tool" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "profile: no binary $bin (cargo build --release)" >&2; exit 2; }
UP=19211; NGX=19212; CE=19213; CEM=19214
ports_free $UP $NGX $CE $CEM
work=$(mktemp -d /tmp/chainedge-profile.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$out"
workers=1

# The node: nginx answering every call at once. The reference proxy as one nginx process
# (no master) so that valgrind and strace see all of its work.
nginx_static_node
nginx_reference_proxy
sed -i '1i master_process off;\ndaemon off;' "$work/nginx.conf"
nginx -c "$work/upstream.conf" -p "$work" -g 'daemon off;' &
pids+=($!)

# chainedge on one worker thread, with a route that proxies without the gateway path.
plugins_with_plain_route
threads=1 edge_app edge $CE $CEM <<YAML
health:
  interval_ms: 5000
pools:
  eth_el:
    hosts:
      - {id: static-el, url: "http://127.0.0.1:$UP", family: portal}
YAML
sed -i "s#^plugins: .*#plugins: $work/plugins#" "$work/edge.yaml"
threads=1 edge_pingora edge
tenant=$("$bin" --app "$work/edge.yaml" tenants create --name profile --plan enterprise)
key=$("$bin" --app "$work/edge.yaml" keys create --tenant "$tenant" 2>/dev/null)

distinct_reads "$work/distinct.txt"
chain_id='{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'

# load N ROUTE: N requests, $CONNS connections (4), to one of the routes.
load() {
  local args=(--no-tui -n "$1" -c "${CONNS:-4}" -m POST -H "Content-Type: application/json")
  case $2 in
    plain) oha "${args[@]}" -d "$chain_id" "http://127.0.0.1:$CE/bench/plain/" ;;
    hit) oha "${args[@]}" -H "x-token: $key" -d "$chain_id" "http://127.0.0.1:$CE/rpc/eth" ;;
    distinct) oha "${args[@]}" -H "x-token: $key" -Z "$work/distinct.txt" "http://127.0.0.1:$CE/rpc/eth" ;;
    nginx) oha "${args[@]}" -Z "$work/distinct.txt" "http://127.0.0.1:$NGX/" ;;
  esac
}
ready() { for _ in $(seq 1 600); do curl -s -o /dev/null "$1" && return 0; sleep 0.2; done; return 1; }
routes_of() { [ "$1" = nginx ] && echo nginx || echo "plain hit distinct"; }
start() { # start WHO [TOOL...]: chainedge or nginx under TOOL, its pid in $started
  local who=$1; shift
  if [ "$who" = nginx ]; then
    "$@" nginx -c "$work/nginx.conf" -p "$work" >"$work/nginx.out" 2>&1 &
    started=$!; pids+=($started); ready "http://127.0.0.1:$NGX/"
  else
    "$@" "$bin" -c "$work/edge-pingora.yaml" --app "$work/edge.yaml" >/dev/null 2>"$work/edge.log" &
    started=$!; pids+=($started); ready "http://127.0.0.1:$CE/console/"
  fi
}
answered_all() { grep -q "\[200\] $2 responses" "$1" || { echo "profile: not every answer was 200:" >&2; grep -A4 "Status code distribution" "$1" >&2; exit 1; }; }

declare -A instr allocs syscalls i1miss d1miss
cache_sim=(); [ -n "${CACHE:-}" ] && cache_sim=(--cache-sim=yes)
# Instructions and allocations: callgrind, counters zeroed after a warm-up.
for who in chainedge nginx; do
  start $who valgrind --tool=callgrind "${cache_sim[@]}" --callgrind-out-file="$work/cg.$who.%p"
  vpid=$started
  for route in $(routes_of $who); do load 3000 $route >/dev/null 2>&1; done
  for route in $(routes_of $who); do
    callgrind_control -z $vpid >/dev/null 2>&1
    load "$n" $route > "$work/oha.$route" 2>&1
    answered_all "$work/oha.$route" "$n"
    callgrind_control -d "$route" $vpid >/dev/null 2>&1
    sleep 1
    files=$(ls "$work"/cg.$who.$vpid.* 2>/dev/null | grep -v '\.0$' || true)
    read -r total alloc i1 d1 <<<"$(python3 bench/callgrind_counts.py $files)"
    instr[$route]=$((total / n)); allocs[$route]=$(awk -v a="$alloc" -v n="$n" 'BEGIN{printf "%.1f", a/n}')
    [ -n "${i1:-}" ] && i1miss[$route]=$((i1 / n)) && d1miss[$route]=$((d1 / n))
    { callgrind_annotate --inclusive=yes $files 2>/dev/null || true; } | head -n $((top + 25)) > "$out/$route.txt" || true
    mkdir -p "$out/raw"; for f in $files; do mv "$f" "$out/raw/$route.$(basename "$f")"; done
  done
  stop_last
done

# Syscalls: strace counting every thread, not under valgrind.
for who in chainedge nginx; do
  start $who
  spid=$started
  for route in $(routes_of $who); do load 3000 $route >/dev/null 2>&1; done
  for route in $(routes_of $who); do
    strace -c -f -p "$spid" -o "$work/strace.$route" 2>/dev/null &
    tpid=$!
    sleep 1
    load "$n" $route > "$work/oha.$route" 2>&1
    answered_all "$work/oha.$route" "$n"
    kill -INT $tpid; wait $tpid 2>/dev/null || true
    calls=$(awk '$NF == "total" {print $4}' "$work/strace.$route")
    syscalls[$route]=$(awk -v a="${calls:-0}" -v n="$n" 'BEGIN{printf "%.1f", a/n}')
    sed -n '1,14p' "$work/strace.$route" > "$out/$route.syscalls.txt"
  done
  stop_last
done

# Where the time goes on the real CPU (kernel included): perf sampling chainedge while it
# serves distinct reads at a fixed rate below saturation (valgrind counts no syscall or
# wakeup, and runs no SHA extension).
if command -v perf >/dev/null; then
  start chainedge
  ppid=$started
  load 3000 distinct >/dev/null 2>&1
  perf record -q -e cpu-clock -F 4999 -p "$ppid" -o "$work/perf.data" -- sleep 6 >/dev/null 2>&1 &
  rpid=$!
  oha --no-tui -z 5s -c 64 -q 5000 -m POST -H "Content-Type: application/json" -H "x-token: $key" \
    -Z "$work/distinct.txt" "http://127.0.0.1:$CE/rpc/eth" >/dev/null 2>&1
  wait $rpid || true
  { perf report -q -i "$work/perf.data" --no-children --sort dso,sym --percent-limit 0.4 --stdio 2>/dev/null || true; } \
    | head -n 80 > "$out/distinct.perf.txt" || true
  stop_last
fi

# row LABEL ROUTE: one path's row (the cache columns only with CACHE=1).
row() {
  local cache=""
  [ -n "${CACHE:-}" ] && cache=" ${i1miss[$2]:-} | ${d1miss[$2]:-} |"
  echo "| $1 | ${instr[$2]} | ${allocs[$2]}$([ "$2" = nginx ] && echo " (its pools)") | ${syscalls[$2]} |$cache"
}
{
  echo "Per request, $n requests over ${CONNS:-4} connections after 3,000 to warm up; one worker thread"
  echo "(nginx: one process, no master); the node a static nginx. \`$bin\`."
  echo
  if [ -n "${CACHE:-}" ]; then
    echo "| path | instructions | allocations | syscalls | L1i misses | L1d misses |"
    echo "|---|---|---|---|---|---|"
  else
    echo "| path | instructions | allocations | syscalls |"
    echo "|---|---|---|---|"
  fi
  row "nginx proxying the distinct reads" nginx
  row "chainedge plain passthrough" plain
  row "chainedge cache hit (\`eth_chainId\`)" hit
  row "chainedge distinct read (\`eth_getBalance\` at \`pending\`)" distinct
  echo
  echo "Each path's functions by inclusive instructions: \`$out/<path>.txt\`; syscalls by name: \`$out/<path>.syscalls.txt\`."
} | publish RESULTS-profile.md
