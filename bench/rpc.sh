#!/usr/bin/env bash
# The JSON-RPC rows of issue 21, loopback only, in one run with nginx as the reference:
#   (b)  nginx proxying eth_chainId to a static upstream (nginx `return 200`)
#   (d)  chainedge /rpc/eth, a read the cache never keeps (eth_getBalance at `pending`):
#        the gateway path
#   (d2) chainedge /rpc/eth, a cached read (eth_chainId: kept forever after the first)
#   (d3) chainedge /rpc/eth, a batch of 10 cached reads (each kept after its first call)
#   (d4) chainedge /rpc/eth, distinct reads (eth_getBalance of one of 200,000 addresses at
#        random, at `pending`): neither kept nor coalesced, the path every distinct read
#        takes; (b4) nginx proxying the same bodies, and both again at half (d4)'s peak
#        (fixed rate) for p50/p99
#   (e)  chainedge local handler (/console/app.js from memory)
#   (s)  the static upstream itself (nginx `return 200`), no proxy: the most requests/s
#        oha drives on this box, the ceiling of any row (a cache hit's included)
# each with oha at 64 connections; then, against a counting node (bench/rpc_upstream.py):
# a thundering herd (200 identical eth_getBalance at once, 5 waves: node calls per wave)
# and eth_getLogs over 100,000 blocks against a node that refuses more than 1,000 logs.
# Writes bench/RESULTS-rpc.md.
#
#   bench/rpc.sh [seconds per run, default 10]
#   BENCH_BIN=target/pgo/dist/chainedge bench/rpc.sh   a binary built elsewhere (the
#                                                      profile-guided build: scripts/pgo.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
secs=${1:-10}
conns=64
workers=2
command -v nginx >/dev/null || { SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo; $SUDO apt-get install -y -qq nginx >/dev/null; }
command -v oha >/dev/null || cargo install oha --locked -q
if [ -n "${BENCH_BIN:-}" ]; then
  bin=$BENCH_BIN
  [ -x "$bin" ] || { echo "rpc: BENCH_BIN=$bin is not an executable (scripts/pgo.sh builds one)" >&2; exit 2; }
else
  cargo build --profile ${BENCH_PROFILE:-dist} -q --bin chainedge
  bin=target/${BENCH_PROFILE:-dist}/chainedge
  [ "${BENCH_PROFILE:-dist}" = dev ] && bin=target/debug/chainedge
fi

work=$(mktemp -d /tmp/chainedge-rpcbench.XXXXXX)
pids=()
# SIGINT: a fast stop for chainedge (SIGTERM would wait out its graceful period) and
# nginx; whatever is left half a second later is killed.
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT
UP=19201; NGX=19202; CE=19203; CEM=19204; NODE=19205; CE2=19206; CEM2=19207
ports_free $UP $NGX $CE $CEM $NODE $CE2 $CEM2

nginx_static_node
nginx_reference_proxy
nginx -c "$work/upstream.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
ngx_pid=$!
python3 bench/rpc_upstream.py $NODE &
pids+=($!)

# app NAME PORT METRICS UPSTREAM FAMILY
app() {
  threads=$workers edge_app "$1" "$2" "$3" <<YAML
health:
  interval_ms: 5000
rpc:
  get_logs: {chunk_blocks: 20000}
pools:
  eth_el:
    hosts:
      - {id: el-1, url: "http://127.0.0.1:$4", family: $5}
YAML
  threads=$workers edge_pingora "$1"
}
app static $CE $CEM $UP portal
app counted $CE2 $CEM2 $NODE el-geth
# The static edge also has `bench.plain` (no key, no limit, no JSON-RPC): the CPU rows'
# plain passthrough of the same bodies.
plugins_with_plain_route
sed -i "s#^plugins: .*#plugins: $work/plugins#" "$work/static.yaml"
start() { # start NAME PORT: the instance (in this shell, so cleanup stops it); its key in $started_key
  local tenant
  tenant=$($bin --app "$work/$1.yaml" tenants create --name bench --plan enterprise)
  started_key=$($bin --app "$work/$1.yaml" keys create --tenant "$tenant" 2>/dev/null)
  $bin -c "$work/$1-pingora.yaml" --app "$work/$1.yaml" >/dev/null 2>"$work/$1.log" &
  pids+=($!)
  started_pid=$!
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$2/console/" && break; sleep 0.1; done
}
start static $CE
key=$started_key
edge_pid=$started_pid
start counted $CE2
key2=$started_key

# load NAME URL BODY [header] -> "rps p50_ms p99_ms"
load() {
  local name=$1 url=$2 body=$3; shift 3
  local args=(--no-tui --output-format json -z "${secs}s" -c $conns)
  if [ -n "$body" ]; then args+=(-m POST -H "Content-Type: application/json" -d "$body"); fi
  for h in "$@"; do args+=(-H "$h"); done
  oha "${args[@]}" "$url" > "$work/$name.json" 2>/dev/null || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["latencyPercentiles"]; print("%.0f %.3f %.3f" % (d["summary"]["requestsPerSec"], p["p50"]*1000, p["p99"]*1000))' "$work/$name.json" 2>/dev/null || echo "n/a n/a n/a"
}
chain_id='{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
pending='{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000219ab540356cBB839Cbe05303d7705Fa","pending"]}'
# A batch of ten reads kept forever (by hash); each is warmed alone (the static upstream
# answers any body with one object, so a batch that reached it would not be kept).
batch10="[$(for i in $(seq 1 10); do
  case $i in
    1) printf '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}' ;;
    2) printf ',{"jsonrpc":"2.0","id":2,"method":"net_version","params":[]}' ;;
    *) printf ',{"jsonrpc":"2.0","id":%d,"method":"eth_getBlockByHash","params":["0x%064x",false]}' "$i" "$i" ;;
  esac
done)]"
python3 -c 'import json,sys; [print(json.dumps(c)) for c in json.loads(sys.argv[1])]' "$batch10" | while read -r one; do
  curl -s -o /dev/null -H "x-token: $key" -H "Content-Type: application/json" -d "$one" "http://127.0.0.1:$CE/rpc/eth"
done
# Warm the cache (and check the statuses the rows claim).
curl -s -D - -o /dev/null -H "x-token: $key" -H "Content-Type: application/json" -d "$chain_id" "http://127.0.0.1:$CE/rpc/eth" >/dev/null
d2_status=$(curl -s -D - -o /dev/null -H "x-token: $key" -H "Content-Type: application/json" -d "$chain_id" "http://127.0.0.1:$CE/rpc/eth" | awk -F': ' 'tolower($1)=="x-cache-status" {print $2}' | tr -d '\r')
d_status=$(curl -s -D - -o /dev/null -H "x-token: $key" -H "Content-Type: application/json" -d "$pending" "http://127.0.0.1:$CE/rpc/eth" | awk -F': ' 'tolower($1)=="x-cache-status" {print $2}' | tr -d '\r')
d3_status=$(curl -s -D - -o /dev/null -H "x-token: $key" -H "Content-Type: application/json" -d "$batch10" "http://127.0.0.1:$CE/rpc/eth" | awk -F': ' 'tolower($1)=="x-cache-status" {print $2}' | tr -d '\r')
echo "bench: (d) is '$d_status', (d2) is '$d2_status', (d3) is '$d3_status'" >&2

# Distinct reads: oha draws each request's body at random from 200,000 reads of
# different addresses (at `pending`), so no answer is kept and, with 64 in flight out of
# 200,000, practically none is shared. nginx proxies the same bodies: (b4) is the same
# load against the reference.
distinct_reads "$work/distinct.txt"
# distinct NAME URL [oha args] -> "rps p50_ms p99_ms"
distinct() {
  local name=$1 url=$2; shift 2
  oha --no-tui --output-format json -z "${secs}s" -c $conns -m POST -H "Content-Type: application/json" \
    -H "x-token: $key" -Z "$work/distinct.txt" "$@" "$url" > "$work/$name.json" 2>/dev/null || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["latencyPercentiles"]; s=d["statusCodeDistribution"]; assert list(s)==["200"], s; print("%.0f %.3f %.3f" % (d["summary"]["requestsPerSec"], p["p50"]*1000, p["p99"]*1000))' "$work/$name.json" 2>/dev/null || echo "n/a n/a n/a"
}

# Interleaved rounds; each row its median round.
median() { printf '%s\n' "$@" | sort -g -k1,1 | awk -v n=$# 'NR == int((n + 1) / 2)'; }
bs=(); b4s=(); ds=(); d2s=(); d3s=(); d4s=(); es=(); ss=()
for round in 1 2 3; do
  bs+=("$(load "nginx_$round" "http://127.0.0.1:$NGX/" "$chain_id")")
  ds+=("$(load "rpc_$round" "http://127.0.0.1:$CE/rpc/eth" "$pending" "x-token: $key")")
  d2s+=("$(load "cached_$round" "http://127.0.0.1:$CE/rpc/eth" "$chain_id" "x-token: $key")")
  d3s+=("$(load "batch_$round" "http://127.0.0.1:$CE/rpc/eth" "$batch10" "x-token: $key")")
  b4s+=("$(distinct "nginx_distinct_$round" "http://127.0.0.1:$NGX/")")
  d4s+=("$(distinct "distinct_$round" "http://127.0.0.1:$CE/rpc/eth")")
  es+=("$(load "local_$round" "http://127.0.0.1:$CE/console/app.js" "")")
  ss+=("$(load "static_$round" "http://127.0.0.1:$UP/" "$chain_id")")
done
read -r br bp50 bp99 <<<"$(median "${bs[@]}")"
read -r dr dp50 dp99 <<<"$(median "${ds[@]}")"
read -r d2r d2p50 d2p99 <<<"$(median "${d2s[@]}")"
read -r d3r d3p50 d3p99 <<<"$(median "${d3s[@]}")"
read -r d4r d4p50 d4p99 <<<"$(median "${d4s[@]}")"
read -r er ep50 ep99 <<<"$(median "${es[@]}")"
read -r sr sp50 sp99 <<<"$(median "${ss[@]}")"
read -r b4r b4p50 b4p99 <<<"$(median "${b4s[@]}")"
# Each round's (d4)/(b4): the two runs of a round are minutes apart at most, so their
# ratio drifts less than the ratio of two medians taken over the whole run.
d4_rounds=$(for i in 0 1 2; do
  awk -v d="${d4s[$i]%% *}" -v b="${b4s[$i]%% *}" 'BEGIN{ if (b > 0) printf "%.2f ", d/b }'; done)
# Distinct reads at half of (d4)'s peak, a fixed rate (coordinated omission corrected),
# through nginx and through chainedge, in three rounds of their own (one 10 s run's p99
# on this shared box moved by 2x between runs): each side's median p99, every round's.
half=$(awk -v r="$d4r" 'BEGIN{printf "%d", r/2}')
b4hs=(); d4hs=()
for round in 1 2 3; do
  b4hs+=("$(distinct "nginx_half_$round" "http://127.0.0.1:$NGX/" -q "$half" --latency-correction | awk '{print $3, $2}')")
  d4hs+=("$(distinct "edge_half_$round" "http://127.0.0.1:$CE/rpc/eth" -q "$half" --latency-correction | awk '{print $3, $2}')")
done
read -r b4hp99 b4hp50 <<<"$(median "${b4hs[@]}")"
read -r d4hp99 d4hp50 <<<"$(median "${d4hs[@]}")"
b4h_rounds=$(printf '%s\n' "${b4hs[@]}" | awk '{printf "%s ", $1}')
d4h_rounds=$(printf '%s\n' "${d4hs[@]}" | awk '{printf "%s ", $1}')

# CPU per request at a fixed rate below saturation ($cpu_rate req/s, $secs s): the
# user+system time of the proxy's own processes (/proc; nginx's master and workers, the
# edge's one process), divided by the requests answered. Three interleaved rounds.
cpu_rate=${CPU_RATE:-5000}
ticks_of() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
# cpu_per_request NAME "PIDS" URL [distinct | BODY] -> µs per request
cpu_per_request() {
  local name=$1 procs=$2 url=$3 what=$4 t0 t1
  local args=(--no-tui --output-format json -z "${secs}s" -c $conns -q "$cpu_rate" -m POST -H "Content-Type: application/json" -H "x-token: $key")
  if [ "$what" = distinct ]; then args+=(-Z "$work/distinct.txt"); else args+=(-d "$what"); fi
  # shellcheck disable=SC2086
  t0=$(ticks_of $procs)
  oha "${args[@]}" "$url" > "$work/$name.json" 2>/dev/null || true
  # shellcheck disable=SC2086
  t1=$(ticks_of $procs)
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=sum(d["statusCodeDistribution"].values()); print("%.1f" % ((int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4]) * 1e6 / n))' \
    "$work/$name.json" "$t0" "$t1" "$(getconf CLK_TCK)" 2>/dev/null || echo "n/a"
}
ngx_procs="$ngx_pid $(pgrep -P "$ngx_pid" | tr '\n' ' ')"
cpu_b4=(); cpu_c4=(); cpu_d4=(); cpu_d2=()
for round in 1 2 3; do
  cpu_b4+=("$(cpu_per_request "cpu_nginx_$round" "$ngx_procs" "http://127.0.0.1:$NGX/" distinct)")
  cpu_c4+=("$(cpu_per_request "cpu_plain_$round" "$edge_pid" "http://127.0.0.1:$CE/bench/plain/" distinct)")
  cpu_d4+=("$(cpu_per_request "cpu_distinct_$round" "$edge_pid" "http://127.0.0.1:$CE/rpc/eth" distinct)")
  cpu_d2+=("$(cpu_per_request "cpu_cached_$round" "$edge_pid" "http://127.0.0.1:$CE/rpc/eth" "$chain_id")")
done
cb4=$(median "${cpu_b4[@]}"); cc4=$(median "${cpu_c4[@]}"); cd4=$(median "${cpu_d4[@]}"); cd2=$(median "${cpu_d2[@]}")

# The herd and getLogs, against the counting node.
read -r herd_edge herd_direct logs_line <<<"$(python3 - "$CE2" "$NODE" "$key2" <<'PY'
import http.client, json, sys, threading, time
edge, node, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def stats():
    c = http.client.HTTPConnection("127.0.0.1", node); c.request("GET", "/stats"); return json.loads(c.getresponse().read())
def post(port, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", "/rpc/eth" if port == edge else "/", json.dumps(body), dict({"Content-Type": "application/json"}, **headers))
    r = c.getresponse(); return r.status, json.loads(r.read())
def herd(port, headers, n=200, waves=5):
    per_wave = []
    for w in range(waves):
        before = stats().get("eth_getBalance", 0)
        gate = threading.Barrier(n)
        def one(i):
            gate.wait()
            post(port, {"jsonrpc": "2.0", "id": i, "method": "eth_getBalance", "params": ["0x%040x" % w, "latest"]}, headers)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        [t.start() for t in ts]; [t.join() for t in ts]
        per_wave.append(stats().get("eth_getBalance", 0) - before)
    return sum(per_wave) / len(per_wave)
e = herd(edge, {"x-token": key})
d = herd(node, {})
f = {"fromBlock": "0x0", "toBlock": "0x%x" % 99_999}
before = stats().get("eth_getLogs", 0)
t = time.time()
status, v = post(edge, {"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [f]}, {"x-token": key})
took = (time.time() - t) * 1000
calls = stats().get("eth_getLogs", 0) - before
_, direct = post(node, {"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [f]}, {})
logs = len(v.get("result") or [])
print("%.1f %.1f %d,%d,%.0f,%s" % (e, d, logs, calls, took, "refused" if "error" in direct else "answered"))
PY
)"
IFS=, read -r logs_n logs_calls logs_ms direct_logs <<<"$logs_line"
ratio() { awk -v x="$1" -v y="$2" 'BEGIN{ if (y > 0) printf "%.2f", x/y; else print "n/a" }'; }
diff_ms() { awk -v x="$1" -v y="$2" 'BEGIN{ printf "%+.3f", x-y }'; }

cat > bench/RESULTS-rpc.md <<MD
# JSON-RPC benchmark: cache, coalescing, eth_getLogs

\`bench/rpc.sh $secs\` on 2 cores, $(date -u +%Y-%m-%dT%H:%MZ), loopback only, $scheduling. oha, $conns connections,
${secs}s per run, (b)/(d)/(d2)/(d3)/(b4)/(d4)/(e)/(s) interleaved over 3 rounds, each row its median round. nginx: 2
workers, keep-alive to a static upstream (a separate nginx, \`return 200\`); chainedge: 2 worker threads,
binary \`$bin\`. The load generator, the upstream and the proxy share the two cores.

| run | requests/s | p50 ms | p99 ms |
|---|---|---|---|
| (b) nginx reverse proxy, eth_chainId | $br | $bp50 | $bp99 |
| (d) chainedge /rpc/eth, a read never kept (\`eth_getBalance\` at \`pending\`: X-Cache-Status $d_status) | $dr | $dp50 | $dp99 |
| (d2) chainedge /rpc/eth, a cached read (\`eth_chainId\`: X-Cache-Status $d2_status) | $d2r | $d2p50 | $d2p99 |
| (d3) chainedge /rpc/eth, a batch of 10 cached reads (X-Cache-Status $d3_status) | $d3r | $d3p50 | $d3p99 |
| (b4) nginx reverse proxy, distinct reads (the bodies of (d4)) | $b4r | $b4p50 | $b4p99 |
| (d4) chainedge /rpc/eth, distinct reads (\`eth_getBalance\` of one of 200,000 addresses at random, at \`pending\`: neither kept nor coalesced) | $d4r | $d4p50 | $d4p99 |
| (e) chainedge local handler (\`/console/app.js\`) | $er | $ep50 | $ep99 |
| (s) the static upstream itself (nginx \`return 200\`), no proxy | $sr | $sp50 | $sp99 |

| ratio | value | goal |
|---|---|---|
| (d2)/(b) requests/s: a cache hit against nginx proxying | $(ratio "$d2r" "$br") | ≥ 2.5 (issue 67) |
| (s)/(b) requests/s: no proxy at all against nginx proxying (the most any row can reach here, oha's own cost) | $(ratio "$sr" "$br") | — |
| (d2) − (e) p50: a cache hit against a local handler | $(diff_ms "$d2p50" "$ep50") ms | ≤ 0.2 ms |
| (d)/(b) requests/s: one read repeated (coalesced) against nginx | $(ratio "$dr" "$br") | — |
| (d4)/(b4) requests/s: distinct reads, the gateway path, against nginx proxying the same bodies (each round's: ${d4_rounds% }) | $(ratio "$d4r" "$b4r") | ≥ 1.0 (issue 67) |
| (d4) against (b4) at $half req/s (half (d4)'s peak, oha fixed rate, median of 3 rounds), p50 / p99 ms (each round's p99: ${d4h_rounds% } against ${b4h_rounds% }) | $d4hp50 / $d4hp99 against $b4hp50 / $b4hp99 | p99 ≤ nginx's |
| (d3)×10/(d2) calls/s: cached reads in a batch of 10 against one per request | $(ratio "$(awk -v x="$d3r" 'BEGIN{ print x * 10 }')" "$d2r") | — |

**CPU per request** at a fixed $cpu_rate req/s (below every row's peak), the proxy's own
processes' user+system time from /proc over the requests answered, median of 3
interleaved rounds (each round: ${cpu_b4[*]} / ${cpu_c4[*]} / ${cpu_d4[*]} / ${cpu_d2[*]} µs):

| proxy, load | µs per request | against nginx | goal |
|---|---|---|---|
| (b4) nginx proxying the distinct reads | $cb4 | 1.00 | — |
| (c4) chainedge plain passthrough of the same bodies (\`bench.plain\`: no key, no limit, no JSON-RPC) | $cc4 | $(ratio "$cc4" "$cb4") | ≤ 0.9 |
| (d4) chainedge, distinct reads (the gateway path) | $cd4 | $(ratio "$cd4" "$cb4") | ≤ 1.1 |
| (d2) chainedge, a cache hit | $cd2 | $(ratio "$cd2" "$cb4") | — |

The peak RSS (VmHWM) of the static edge after every row above: $(awk '/VmHWM/ {print $2}' "/proc/$edge_pid/status") KiB.

**Thundering herd** (200 identical \`eth_getBalance\` at \`latest\` released at once, against a
node that takes 50 ms; 5 waves): node calls per wave through chainedge **$herd_edge**, straight
to the node **$herd_direct**.

**eth_getLogs over 100,000 blocks** (10,000 logs) against a node that refuses more than
1,000 logs in one answer (-32005): straight to the node the call is **$direct_logs**; through
chainedge **$logs_n logs** in one answer, **$logs_calls node calls** (\`get_logs.chunk_blocks: 20000\`: five
chunks of 2,000 logs, each refused and halved once), **$logs_ms ms**.
MD
cat bench/RESULTS-rpc.md
