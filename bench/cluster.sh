#!/usr/bin/env bash
# Scale-out rows (docs/scale-out.md), loopback only, against baselines in the same run:
#   (d)  `/rpc/eth` on one instance with its own limits
#   (dr) the same instance configuration with limits shared through Redis
#   (h1) haproxy (TCP mode) in front of one Redis-sharing instance
#   (h2) the same haproxy in front of two such instances
# wrk at fixed concurrency, the runs interleaved over rounds and each reported by its
# median round; then oha at a fixed rate for the p50 that Redis sharing adds to (d).
# Every instance gets the same worker threads; on a 2-core machine two instances and
# haproxy share the cores that one instance had, so (h2)/(h1) measures the overhead of
# spreading, not added capacity.
#
#   bench/cluster.sh [seconds per run, default 10] [connections, default 64]
#   ROUNDS=N      rounds of the interleaved runs (default 3)
#   PROFILE=dist  build and run the fat-LTO production build (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
secs=${1:-10}
conns=${2:-64}
rounds=${ROUNDS:-3}
profile=${PROFILE:-release}
workers=2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
for tool in wrk nginx haproxy redis-server; do
  command -v "$tool" >/dev/null || { $SUDO apt-get install -y -qq wrk nginx haproxy redis-server >/dev/null; break; }
done
command -v oha >/dev/null || cargo install oha --locked -q
cargo build --profile "$profile" -q --bin chainedge
bin=target/$profile/chainedge

work=$(mktemp -d /tmp/chainedge-cluster-bench.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT

UP=19201; REDIS=19202; HA1=19203; HA2=19204
LOCAL=19210; SHARED=19211; SHARED2=19212
ports_free $UP $REDIS $HA1 $HA2 $LOCAL $SHARED $SHARED2 19220 19221 19222

# The node: a static JSON-RPC answer from nginx.
cat > "$work/upstream.conf" <<NGINX
worker_processes 1;
pid $work/upstream.pid;
error_log $work/upstream-error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$UP backlog=4096;
    default_type application/json;
    location / { return 200 '{"jsonrpc":"2.0","id":1,"result":"0x1"}'; }
  }
}
NGINX
nginx -c "$work/upstream.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
export BENCH_REDIS_URL="redis://127.0.0.1:$REDIS/"
redis-server --port $REDIS --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
pids+=($!)

# instance NAME PORT METRICS_PORT [redis]: a config whose limits never refuse (what is
# measured is the counting, not refusals).
instance() {
  local name=$1 port=$2 mport=$3 cluster=""
  [ "${4:-}" = redis ] && cluster=$'cluster:\n  redis: env:BENCH_REDIS_URL'
  cat > "$work/$name.yaml" <<YAML
plugins: $PWD/plugins
listen:
  http: ["127.0.0.1:$port"]
metrics:
  listen: "127.0.0.1:$mport"
store:
  path: $work/$name.db
plans: [free, basic, pro, business, enterprise, scale]
threads: $workers
limits:
  default: {anonymous: 10000000, free: 10000000, basic: 10000000, pro: 10000000, business: 10000000, enterprise: 10000000, scale: 10000000}
health:
  interval_ms: 5000
pools:
  eth_el:
    hosts:
      - {id: static-el, url: "http://127.0.0.1:$UP", family: portal}
$cluster
YAML
  cat > "$work/$name-pingora.yaml" <<YAML
version: 1
threads: $workers
pid_file: $work/$name.pid
upgrade_sock: $work/$name-upgrade.sock
YAML
}
instance local $LOCAL 19220
instance shared $SHARED 19221 redis
instance shared2 $SHARED2 19222 redis
tenant=$($bin --app "$work/local.yaml" tenants create --name bench --plan basic)
key=$($bin --app "$work/local.yaml" keys create --tenant "$tenant" 2>/dev/null)
# The same tenant and key in every instance's store.
cp "$work/local.db" "$work/shared.db"; cp "$work/local.db" "$work/shared2.db"
for name in local shared shared2; do
  $bin -c "$work/$name-pingora.yaml" --app "$work/$name.yaml" >/dev/null 2>"$work/$name.log" &
  pids+=($!)
done
for port in $LOCAL $SHARED $SHARED2; do
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$port/console/" && break; sleep 0.1; done
done

# haproxy in TCP mode (an L4 balancer), one frontend per row.
cat > "$work/haproxy.cfg" <<HA
global
    maxconn 8000
    nbthread $workers
defaults
    mode tcp
    timeout connect 5s
    timeout client 75s
    timeout server 75s
frontend one
    bind 127.0.0.1:$HA1
    default_backend one
frontend two
    bind 127.0.0.1:$HA2
    default_backend two
backend one
    server a 127.0.0.1:$SHARED
backend two
    balance roundrobin
    server a 127.0.0.1:$SHARED
    server b 127.0.0.1:$SHARED2
HA
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
pids+=($!)
wait_port $HA2 50

cat > "$work/post-key.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-token"] = "$key"
LUA
# A request that must be a 200 before anything is measured (a refused key would be fast).
for port in $LOCAL $SHARED $SHARED2 $HA1 $HA2; do
  code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "x-token: $key" -H 'Content-Type: application/json' \
    -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' "http://127.0.0.1:$port/rpc/eth" || true)
  [ "$code" = 200 ] || { echo "bench: :$port answered $code" >&2; exit 1; }
done

to_ms() { # wrk prints 1.23ms / 456.00us / 1.02s
  local v=$1
  case "$v" in
    *us) awk -v x="${v%us}" 'BEGIN{printf "%.3f", x/1000}';;
    *ms) awk -v x="${v%ms}" 'BEGIN{printf "%.3f", x}';;
    *s) awk -v x="${v%s}" 'BEGIN{printf "%.3f", x*1000}';;
    *) echo "n/a";;
  esac
}
# run NAME PORT -> "rps p50_ms p99_ms"
run() {
  wrk -t "$workers" -c "$conns" -d "${secs}s" --latency -s "$work/post-key.lua" \
    "http://127.0.0.1:$2/rpc/eth" > "$work/$1.txt" 2>&1 || true
  local rps p50 p99 bad
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/$1.txt")
  p50=$(awk '$1=="50%" {print $2}' "$work/$1.txt")
  p99=$(awk '$1=="99%" {print $2}' "$work/$1.txt")
  bad=$(awk '/Non-2xx/ {print $NF}' "$work/$1.txt")
  [ -z "$bad" ] || echo "bench: $1 had $bad non-2xx answers" >&2
  echo "$rps $(to_ms "$p50") $(to_ms "$p99")"
}
median() { printf '%s\n' "$@" | sort -g -k1,1 | awk -v n=$# 'NR == int((n + 1) / 2)'; }
rps_list() { local out=""; for r in "$@"; do out+="${r%% *} "; done; echo "${out% }"; }
echo "bench: ${secs}s per run, $conns connections, $workers workers each, $rounds rounds ($profile build)" >&2
ds=(); drs=(); h1s=(); h2s=()
for round in $(seq 1 "$rounds"); do
  ds+=("$(run "local_$round" $LOCAL)")
  drs+=("$(run "shared_$round" $SHARED)")
  h1s+=("$(run "ha1_$round" $HA1)")
  h2s+=("$(run "ha2_$round" $HA2)")
done
d=$(median "${ds[@]}"); dr=$(median "${drs[@]}"); h1=$(median "${h1s[@]}"); h2=$(median "${h2s[@]}")

# The p50 Redis adds, at a fixed rate both sustain (half of (d)'s peak).
rate=$(awk -v x="${d%% *}" 'BEGIN{printf "%d", x/2}')
fixed() { # fixed PORT -> "p50_ms p99_ms"
  oha --no-tui -q "$rate" -z 10s -c 32 --latency-correction -m POST \
    -H "x-token: $key" -H 'Content-Type: application/json' \
    -d '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' \
    --output-format json "http://127.0.0.1:$1/rpc/eth" > "$work/oha.json" 2>/dev/null || true
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["latencyPercentiles"]; print("%.3f %.3f" % (p["p50"]*1000, p["p99"]*1000))' "$work/oha.json"
}
fds=(); fdrs=()
for round in $(seq 1 "$rounds"); do fds+=("$(fixed $LOCAL)"); fdrs+=("$(fixed $SHARED)"); done
fd=$(median "${fds[@]}"); fdr=$(median "${fdrs[@]}")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", a/b}'; }
{
  echo "# Scale-out rows ($(date -u +%Y-%m-%d), \`bench/cluster.sh $secs $conns\`, $profile build)"
  echo
  echo "wrk, $conns connections, ${secs} s per run, $rounds rounds interleaved, median round; every"
  echo "chainedge with $workers worker threads; haproxy 2.6 in TCP mode with $workers threads; nginx"
  echo "serving a static JSON-RPC answer as the node. $(nproc) cores for everything."
  echo
  echo "| row | requests/s | p50 ms | p99 ms |"
  echo "|---|---|---|---|"
  set -- $d; echo "| (d) \`/rpc/eth\`, limits per instance | $1 | $2 | $3 |"
  set -- $dr; echo "| (dr) \`/rpc/eth\`, limits shared through Redis | $1 | $2 | $3 |"
  set -- $h1; echo "| (h1) haproxy → one instance (Redis limits) | $1 | $2 | $3 |"
  set -- $h2; echo "| (h2) haproxy → two instances (Redis limits) | $1 | $2 | $3 |"
  echo
  echo "Rounds (requests/s): (d) $(rps_list "${ds[@]}"); (dr) $(rps_list "${drs[@]}");"
  echo "(h1) $(rps_list "${h1s[@]}"); (h2) $(rps_list "${h2s[@]}")."
  echo "Fixed-rate p50 ms by round: (d) $(rps_list "${fds[@]}"); (dr) $(rps_list "${fdrs[@]}")."
  echo
  echo "| ratio | value | goal |"
  echo "|---|---|---|"
  echo "| (dr)/(d) requests/s | $(ratio "${dr%% *}" "${d%% *}") | ≥ 0.95 |"
  set -- $fd; fd50=$1; set -- $fdr; fdr50=$1
  echo "| (dr) − (d) p50 at $rate req/s (oha fixed rate, 32 connections, median of $rounds rounds) | $(awk -v a="$fdr50" -v b="$fd50" 'BEGIN{printf "%.3f", a-b}') ms ((d) $fd, (dr) $fdr p50/p99 ms) | ≤ 0.05 ms |"
  echo "| (h2)/(h1) requests/s | $(ratio "${h2%% *}" "${h1%% *}") | — (one machine's cores) |"
} | tee "$work/RESULTS-cluster.md"
cp "$work/RESULTS-cluster.md" bench/RESULTS-cluster.md
