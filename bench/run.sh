#!/usr/bin/env bash
# One command, loopback only: a static JSON-RPC upstream (nginx `return 200`), nginx as a
# plain keep-alive reverse proxy (the reference), and chainedge with the same number of
# worker threads, each driven by wrk at fixed concurrency. Writes bench/RESULTS.md.
#
#   bench/run.sh [seconds per run, default 10] [connections, default 64]
#   PROFILE=1 bench/run.sh ...   also records `perf` call graphs of chainedge during (c)
#                                and (d) into /tmp/chainedge-perf-{c,d}.data
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
conns=${2:-64}
workers=2
for tool in wrk nginx; do
  command -v "$tool" >/dev/null || { SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo; $SUDO apt-get install -y -qq wrk nginx >/dev/null; }
done
cargo build --release -q
bin=target/release/chainedge

work=$(mktemp -d /tmp/chainedge-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; sleep 0.5; rm -rf "$work"; }
trap cleanup EXIT

UP=19101; NGX=19102; CE=19103; CEM=19104
for p in $UP $NGX $CE $CEM; do
  if (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then echo "bench: port $p is busy" >&2; exit 1; fi
done

# Upstream and reference proxy: one nginx, two servers.
cat > "$work/nginx.conf" <<NGINX
worker_processes $workers;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  upstream node { server 127.0.0.1:$UP; keepalive 128; }
  server {
    listen 127.0.0.1:$UP;
    default_type application/json;
    location = /eth/v1/node/syncing { return 200 '{"data":{"head_slot":"100","sync_distance":"0","is_syncing":false}}'; }
    location / { return 200 '{"jsonrpc":"2.0","id":1,"result":"0x1"}'; }
  }
  server {
    listen 127.0.0.1:$NGX;
    location / {
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
pids+=($!)

cat > "$work/app.yaml" <<YAML
plugins: $PWD/plugins
listen:
  http: ["127.0.0.1:$CE"]
metrics:
  listen: "127.0.0.1:$CEM"
store:
  path: $work/store.db
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
  eth_cl:
    hosts:
      - {id: static-cl, url: "http://127.0.0.1:$UP", family: cl-lighthouse}
YAML
cat > "$work/pingora.yaml" <<YAML
version: 1
threads: $workers
pid_file: $work/chainedge.pid
upgrade_sock: $work/upgrade.sock
YAML
tenant=$($bin --app "$work/app.yaml" tenants create --name bench --plan basic)
key=$($bin --app "$work/app.yaml" keys create --tenant "$tenant" 2>/dev/null)
$bin -c "$work/pingora.yaml" --app "$work/app.yaml" >/dev/null 2>"$work/chainedge.log" &
ce_pid=$!
pids+=($ce_pid)
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$CE/console/" && break; sleep 0.1; done

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
wrk.headers["Content-Type"] = "application/json"
LUA
cat > "$work/key.lua" <<LUA
wrk.headers["x-token"] = "$key"
LUA
cat > "$work/post-key.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-token"] = "$key"
LUA

# run NAME URL [lua] -> "rps p50_ms p99_ms"
run() {
  local url=$2 script=${3:-}
  local args=(-t "$workers" -c "$conns" -d "${secs}s" --latency)
  [ -n "$script" ] && args+=(-s "$script")
  wrk "${args[@]}" "$url" > "$work/$1.txt" 2>&1 || true
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/$1.txt")
  p50=$(awk '$1=="50%" {print $2}' "$work/$1.txt")
  p99=$(awk '$1=="99%" {print $2}' "$work/$1.txt")
  echo "$rps $(to_ms "$p50") $(to_ms "$p99")"
}
to_ms() { # wrk prints 1.23ms / 456.00us / 1.02s
  local v=$1
  case "$v" in
    *us) awk -v x="${v%us}" 'BEGIN{printf "%.3f", x/1000}';;
    *ms) awk -v x="${v%ms}" 'BEGIN{printf "%.3f", x}';;
    *s) awk -v x="${v%s}" 'BEGIN{printf "%.3f", x*1000}';;
    *) echo "n/a";;
  esac
}
hwm_kib() { awk '/VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
nginx_proxy_hwm() { # the proxy's workers share the process with the upstream server; report all workers
  local total=0
  for p in $(pgrep -P "$(cat "$work/nginx.pid")"); do total=$((total + $(hwm_kib "$p"))); done
  echo $total
}

echo "bench: ${secs}s per run, $conns connections, $workers workers each" >&2
a=$(run direct "http://127.0.0.1:$UP/" "$work/post.lua")
b=$(run nginx "http://127.0.0.1:$NGX/" "$work/post.lua")
profile() { # profile NAME: perf for the length of one run, in the background
  if [ -n "${PROFILE:-}" ] && command -v perf >/dev/null; then
    perf record -q -F 499 -g -p "$ce_pid" -o "/tmp/chainedge-perf-$1.data" -- sleep "$secs" >/dev/null 2>&1 &
  fi
}
profile c
c=$(run passthrough "http://127.0.0.1:$CE/rpc/eth-beacon/eth/v1/node/version" "$work/key.lua")
wait_perf() { [ -n "${PROFILE:-}" ] && sleep 1 || true; }
wait_perf
profile d
d=$(run rpc "http://127.0.0.1:$CE/rpc/eth" "$work/post-key.lua")
wait_perf
e=$(run local "http://127.0.0.1:$CE/console/app.js")
ce_hwm=$(hwm_kib "$ce_pid")
ngx_hwm=$(nginx_proxy_hwm)

# Latency at half of (d)'s peak: wrk2 is not available, so a fixed-rate run uses fewer
# connections; this reports (d) and (a) at 4 connections as the low-load comparison.
conns_low=4
d_low=$(conns=$conns_low; run rpc_low "http://127.0.0.1:$CE/rpc/eth" "$work/post-key.lua")
a_low=$(conns=$conns_low; run direct_low "http://127.0.0.1:$UP/" "$work/post.lua")

read -r ar ap50 ap99 <<<"$a"; read -r br bp50 bp99 <<<"$b"; read -r cr cp50 cp99 <<<"$c"
read -r dr dp50 dp99 <<<"$d"; read -r er ep50 ep99 <<<"$e"
read -r dlr dlp50 dlp99 <<<"$d_low"; read -r alr alp50 alp99 <<<"$a_low"
ratio() { awk -v x="$1" -v y="$2" 'BEGIN{ if (y > 0) printf "%.2f", x/y; else print "n/a" }'; }
added=$(awk -v x="$dlp50" -v y="$alp50" 'BEGIN{printf "%.3f", x-y}')

cat > bench/RESULTS.md <<MD
# Benchmark results

\`bench/run.sh $secs $conns\` on $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), loopback only.
wrk, $workers threads, $conns connections, ${secs}s per run. nginx: $workers workers, keep-alive
(128) to the upstream. chainedge: $workers worker threads.

| run | requests/s | p50 ms | p99 ms |
|---|---|---|---|
| (a) direct to the static upstream | $ar | $ap50 | $ap99 |
| (b) nginx reverse proxy | $br | $bp50 | $bp99 |
| (c) chainedge passthrough (beacon proxy: key, path policy, Pingora proxy) | $cr | $cp50 | $cp99 |
| (d) chainedge \`/rpc/eth\` (key auth, rate limit, method table, gateway) | $dr | $dp50 | $dp99 |
| (e) chainedge local handler (\`/console/app.js\` from memory) | $er | $ep50 | $ep99 |

| ratio | value | target |
|---|---|---|
| (c)/(b) requests/s | $(ratio "$cr" "$br") | ≥ 1.0 |
| (d)/(c) requests/s | $(ratio "$dr" "$cr") | ≥ 0.8 |
| (d) − (a) p50 at $conns_low connections | ${added} ms ((d) $dlp50 ms, (a) $alp50 ms) | ≤ 0.5 ms |

Peak memory (VmHWM): chainedge $ce_hwm KiB; nginx workers (proxy and upstream share them) $ngx_hwm KiB.

Not measured yet: memory for 10,000 idle keep-alive connections and 1,000 open SSE
streams; latency at exactly 50% of (d)'s peak (needs a fixed-rate load generator; the
low-concurrency run stands in).
MD
cat bench/RESULTS.md
