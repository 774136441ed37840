#!/usr/bin/env bash
# Instructions per request of two chainedge builds, under valgrind's callgrind: the same
# count for the same binary and inputs whatever else the machine is doing, so an A/B of
# a change is not lost in wrk's ±5% run-to-run noise. Loopback only.
#
#   bench/instructions.sh BASELINE_BIN [BIN, default target/dist/chainedge] [requests, default 20000]
#   CLUSTER_REDIS=1 bench/instructions.sh BIN BIN   the same build, "this" with its limits
#                                                   shared over a local redis-server
#   RPC_BODY='{...}' bench/instructions.sh ...  another /rpc/eth call (default eth_chainId)
#   UP_BODY='{...}' ...                        the upstream's answer to every call
#                                (default {"jsonrpc":"2.0","id":1,"result":"0x1"})
#   BASE_YAML=... THIS_YAML=... ...            app YAML appended to each build's config:
#                                the same binary twice with a setting off and on
#   BASELINE_REV=<git rev> bench/instructions.sh ...  the baseline's own manifests
#                                (plugins/ at that revision) and its own store, for a
#                                baseline that lacks handlers or migrations added since
#
# For each build: a static upstream (nginx `return 200`), chainedge on one worker thread
# under callgrind, 3,000 warm-up requests per route, then counters zeroed and N requests
# (oha, 4 connections) to the plain passthrough and to /rpc/eth; prints instructions per
# request and the ratio against the baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
base=$1; bin=${2:-target/dist/chainedge}; n=${3:-20000}
for tool in valgrind nginx oha curl; do command -v $tool >/dev/null || { echo "instructions: needs $tool" >&2; exit 2; }; done
[ -z "${CLUSTER_REDIS:-}" ] || command -v redis-server >/dev/null || { echo "instructions: needs redis-server" >&2; exit 2; }
UP=19201; CE=19203; CEM=19204
work=$(mktemp -d /tmp/chainedge-instr.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
# The upstream's answer: inline by default; UP_BODY (longer than nginx's 4 KiB limit on a
# config parameter) from a file, every method turned into a GET of it by error_page.
answer="return 200 '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"0x1\"}';"
if [ -n "${UP_BODY:-}" ]; then
  printf '%s' "$UP_BODY" > "$work/up.json"
  chmod 755 "$work"; chmod 644 "$work/up.json"  # nginx's workers read it as nobody
  answer="error_page 405 =200 /up.json; return 405; } location = /up.json { root $work;"
fi
cat > "$work/up.conf" <<NGINX
worker_processes 1;
pid $work/up.pid;
error_log $work/up-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$UP;
    default_type application/json;
    location / { $answer }
  }
}
NGINX
nginx -c "$work/up.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
plugins_with_plain_route
cat > "$work/app.yaml" <<YAML
plugins: $work/plugins
listen:
  http: ["127.0.0.1:$CE"]
metrics:
  listen: "127.0.0.1:$CEM"
store:
  path: $work/store.db
plans: [free, basic, pro, business, enterprise, scale]
threads: 1
limits:
  default: {anonymous: 10000000, free: 10000000, basic: 10000000, pro: 10000000, business: 10000000, enterprise: 10000000, scale: 10000000}
health:
  interval_ms: 5000
pools:
  eth_el:
    hosts:
      - {id: static-el, url: "http://127.0.0.1:$UP", family: portal}
YAML
cat > "$work/pingora.yaml" <<YAML
version: 1
threads: 1
pid_file: $work/chainedge.pid
upgrade_sock: $work/upgrade.sock
# A stop ends the run at once: nothing is in flight once the counters are read.
grace_period_seconds: 1
graceful_shutdown_timeout_seconds: 1
YAML
# "this" run's config: the same, plus Redis-shared limits when asked. The baseline's:
# its own store, and its revision's manifests when given.
cp "$work/app.yaml" "$work/app_this.yaml"
sed "s#$work/store.db#$work/store_base.db#" "$work/app.yaml" > "$work/app_base.yaml"
if [ -n "${BASELINE_REV:-}" ]; then
  git archive "$BASELINE_REV" plugins | tar -x -C "$work" --transform "s#^plugins#plugins_base#"
  rm -rf "$work/plugins_base/contract"
  cp "$work/plugins/eth.yaml" "$work/plugins_base/eth.yaml.bench"
  tail -1 "$work/plugins_base/eth.yaml.bench" >> "$work/plugins_base/eth.yaml"
  rm "$work/plugins_base/eth.yaml.bench"
  sed -i "s#^plugins: .*#plugins: $work/plugins_base#" "$work/app_base.yaml"
fi
[ -z "${BASE_YAML:-}" ] || printf '%b\n' "$BASE_YAML" >> "$work/app_base.yaml"
[ -z "${THIS_YAML:-}" ] || printf '%b\n' "$THIS_YAML" >> "$work/app_this.yaml"
if [ -n "${CLUSTER_REDIS:-}" ]; then
  redis-server --port 19205 --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
  pids+=($!)
  export BENCH_REDIS_URL=redis://127.0.0.1:19205/
  printf 'cluster:\n  redis: env:BENCH_REDIS_URL\n' >> "$work/app_this.yaml"
fi
# A key of a basic tenant in a build's store: new_key BIN APP
new_key() {
  local tenant
  tenant=$("$1" --app "$2" tenants create --name instr --plan basic)
  "$1" --app "$2" keys create --tenant "$tenant" 2>/dev/null
}
# RPC_BODY: the /rpc/eth call (default eth_chainId, answered from the cache after its
# first call; a read at `pending`, never kept, measures the path to the node).
body=${RPC_BODY:-'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'}
load() { # load N ROUTE
  if [ "$2" = plain ]; then
    oha --no-tui -n "$1" -c 4 -m POST -d "$body" "http://127.0.0.1:$CE/bench/plain/"
  else
    oha --no-tui -n "$1" -c 4 -m POST -H "x-token: $key" -d "$body" "http://127.0.0.1:$CE/rpc/eth"
  fi
}
# per_request NAME BIN APP -> "plain rpc" instructions per request
per_request() {
  local name=$1 b=$2 app=$3 out=()
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.$name.%p" "$b" -c "$work/pingora.yaml" --app "$app" >"$work/log.$name" 2>&1 &
  local vpid=$!
  for _ in $(seq 1 300); do curl -s -o /dev/null "http://127.0.0.1:$CE/console/" && break; sleep 0.5; done
  load 3000 plain >/dev/null 2>&1; load 3000 rpc >/dev/null 2>&1
  for route in plain rpc; do
    callgrind_control -z $vpid >/dev/null 2>&1
    load "$n" $route > "$work/oha.$name.$route" 2>&1
    callgrind_control -d $vpid >/dev/null 2>&1
    sleep 1
    local total=0 f t
    for f in "$work"/cg.$name.$vpid.*; do
      t=$(grep -E '^(summary|totals):' "$f" | head -1 | awk '{print $2}'); total=$((total + ${t:-0})); rm -f "$f"
    done
    grep -q "\[200\] $n responses" "$work/oha.$name.$route" || { echo "instructions: $name $route: not every answer was 200" >&2; grep -A3 "Status code distribution" "$work/oha.$name.$route" >&2; kill $vpid; exit 1; }
    out+=($((total / n)))
  done
  kill $vpid; wait $vpid 2>/dev/null || true
  echo "${out[@]}"
}
key=$(new_key "$base" "$work/app_base.yaml")
read -r bp br <<<"$(per_request baseline "$base" "$work/app_base.yaml")"
key=$(new_key "$bin" "$work/app_this.yaml")
read -r np nr <<<"$(per_request this "$bin" "$work/app_this.yaml")"
ratio() { awk -v x="$1" -v y="$2" 'BEGIN{printf "%.3f", x/y}'; }
echo "instructions per request ($n requests, 1 worker thread, callgrind):"
echo "| route | baseline ($base) | this ($bin) | this/baseline |"
echo "|---|---|---|---|"
echo "| plain passthrough | $bp | $np | $(ratio "$np" "$bp") |"
echo "| /rpc/eth | $br | $nr | $(ratio "$nr" "$br") |"
