#!/usr/bin/env bash
# One command, loopback only: a static JSON-RPC upstream (nginx `return 200`), nginx as a
# plain keep-alive reverse proxy (the reference), Pingora with no chainedge logic (the
# framework's floor) and chainedge, each proxy with the same number of worker threads,
# driven by wrk at fixed concurrency; then oha at a fixed rate (half of (d)'s peak) for
# added latency, and held connections / SSE streams for memory. Writes bench/RESULTS.md.
#
#   bench/run.sh [seconds per run, default 10] [connections, default 64]
#   ROUNDS=N bench/run.sh ...    rounds of the interleaved (b)/(c)/(d) runs (default 3)
#   HOLD=1 bench/run.sh          starts everything, prints the ports and key, and waits
#                                (for hand-run wrk / perf); Ctrl-C stops it all
#   PROFILE=1 bench/run.sh ...   also records `perf` call graphs of chainedge during (c)
#                                and (d) into /tmp/chainedge-perf-{c,d}.data
#   BASELINE=/path/chainedge bench/run.sh ...   also runs that binary (an earlier build)
#                                on the same config, its (c) and (d) interleaved in the
#                                same rounds: an A/B of two builds in one run
#   BASELINE_REV=<git rev>       the baseline's own manifests (plugins/ at that revision),
#                                for a baseline that lacks handlers added since
#   BENCH_PROFILE=release ...    build with the release profile instead of dist (an A/B
#                                against a release baseline without two fat-LTO builds)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
secs=${1:-10}
conns=${2:-64}
rounds=${ROUNDS:-3}
workers=2
for tool in wrk nginx; do
  command -v "$tool" >/dev/null || { SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo; $SUDO apt-get install -y -qq wrk nginx >/dev/null; }
done
command -v oha >/dev/null || cargo install oha --locked -q
# The production build (Cargo.toml `dist`: fat LTO), references included.
build_profile=${BENCH_PROFILE:-dist}
cargo build --profile "$build_profile" -q --bin chainedge --example bare_proxy --example tokio_floor --example hyper_floor
bin=target/$build_profile/chainedge
# 10,000 held connections need the descriptors (both ends live on this machine).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
nofile=$(ulimit -n)

work=$(mktemp -d /tmp/chainedge-bench.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT

UP=19101; NGX=19102; CE=19103; CEM=19104; BARE=19105; SSE=19106; NGX0=19107; FLOOR=19108; HYPER=19109
ports_free $UP $NGX $CE $CEM $BARE $SSE $NGX0 $FLOOR $HYPER

# The upstream and the reference proxy are separate nginx instances, so each one's CPU
# and memory are its own. The upstream hands beacon event streams to a small SSE server.
python3 bench/sse_upstream.py $SSE &
pids+=($!)
nginx_conf upstream <<NGINX
http {
  access_log off;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$UP backlog=4096;
    default_type application/json;
    location = /eth/v1/node/syncing { return 200 '{"data":{"head_slot":"100","sync_distance":"0","is_syncing":false}}'; }
    location /eth/v1/events {
      proxy_pass http://127.0.0.1:$SSE;
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 1h;
    }
    location / { return 200 '{"jsonrpc":"2.0","id":1,"result":"0x1"}'; }
  }
}
NGINX
nginx_conf nginx <<NGINX
http {
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  upstream node { server 127.0.0.1:$UP; keepalive 128; }
  # (b): the reference. It logs every request as chainedge does (a line per request,
  # written in batches, here to /dev/null as chainedge's stdout is).
  server {
    listen 127.0.0.1:$NGX backlog=4096;
    access_log /dev/null combined buffer=64k flush=1s;
    location / {
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
  # (b0): the same proxy logging nothing, for comparison.
  server {
    listen 127.0.0.1:$NGX0 backlog=4096;
    access_log off;
    location / {
      proxy_pass http://node;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
NGINX
nginx -c "$work/upstream.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
nginx -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
pids+=($!)
target/$build_profile/examples/bare_proxy 127.0.0.1:$BARE 127.0.0.1:$UP $workers >/dev/null 2>&1 &
pids+=($!)
bare_pid=$!
target/$build_profile/examples/tokio_floor 127.0.0.1:$FLOOR 127.0.0.1:$UP $workers >/dev/null 2>&1 &
pids+=($!)
target/$build_profile/examples/hyper_floor 127.0.0.1:$HYPER 127.0.0.1:$UP $workers >/dev/null 2>&1 &
pids+=($!)

# The product's route table plus one operator route: a plain passthrough (no key, no
# rate limit) to the static upstream, the same request nginx proxies in (b).
bench_plugins() { # bench_plugins DIR: the manifests already in DIR, plus the bench route
  cat >> "$1/eth.yaml" <<'ROUTE'
  - {name: bench.plain, methods: [GET, POST], path: "/bench/plain/{*rest}", handler: passthrough, credential: none, pool: eth_el}
ROUTE
}
mkdir -p "$work/plugins"
cp plugins/*.yaml "$work/plugins/"
bench_plugins "$work/plugins"
cat > "$work/app.yaml" <<YAML
plugins: $work/plugins
listen:
  http: ["127.0.0.1:$CE"]
  # The memory runs below hold 10,000 connections from this one address.
  max_connections: 20000
  max_connections_per_client: 20000
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
work_stealing: ${WORK_STEALING:-false}
pid_file: $work/chainedge.pid
upgrade_sock: $work/upgrade.sock
YAML
tenant=$($bin --app "$work/app.yaml" tenants create --name bench --plan basic)
key=$($bin --app "$work/app.yaml" keys create --tenant "$tenant" 2>/dev/null)
$bin -c "$work/pingora.yaml" --app "$work/app.yaml" >/dev/null 2>"$work/chainedge.log" &
ce_pid=$!
pids+=($ce_pid)
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$CE/console/" && break; sleep 0.1; done
CE_OLD=19110; CEM_OLD=19111
if [ -n "${BASELINE:-}" ]; then
  # The same config on other ports and a store of its own, with its own key: a copy of
  # this build's store can carry migrations the baseline does not know (its key lookup
  # then fails and every (d) request is a 401). The connection caps are left out, in
  # case the baseline predates them.
  old_plugins="$work/plugins"
  if [ -n "${BASELINE_REV:-}" ]; then
    old_plugins="$work/plugins_old"
    mkdir -p "$old_plugins"
    git archive "$BASELINE_REV" plugins | tar -x -C "$work" --transform "s#^plugins#plugins_old#"
    bench_plugins "$old_plugins"
  fi
  sed -e "s/127.0.0.1:$CE\"/127.0.0.1:$CE_OLD\"/; s/127.0.0.1:$CEM\"/127.0.0.1:$CEM_OLD\"/; s#$work/store.db#$work/store_old.db#; s#^plugins: .*#plugins: $old_plugins#; /max_connections/d" \
    "$work/app.yaml" > "$work/app_old.yaml"
  sed -e "s#$work/chainedge.pid#$work/chainedge_old.pid#; s#$work/upgrade.sock#$work/upgrade_old.sock#" \
    "$work/pingora.yaml" > "$work/pingora_old.yaml"
  old_tenant=$("$BASELINE" --app "$work/app_old.yaml" tenants create --name bench --plan basic)
  key_old=$("$BASELINE" --app "$work/app_old.yaml" keys create --tenant "$old_tenant" 2>/dev/null)
  "$BASELINE" -c "$work/pingora_old.yaml" --app "$work/app_old.yaml" >/dev/null 2>"$work/chainedge_old.log" &
  pids+=($!)
  for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$CE_OLD/console/" && break; sleep 0.1; done
fi

cat > "$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'
wrk.headers["Content-Type"] = "application/json"
LUA
cat > "$work/key.lua" <<LUA
wrk.headers["x-token"] = "$key"
LUA
# (d) is the gateway path: a read the response cache never keeps (an eth_chainId would be
# answered from the cache after the first; bench/rpc.sh measures that).
cat > "$work/post-key.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000219ab540356cBB839Cbe05303d7705Fa","pending"]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["x-token"] = "$key"
LUA
sed "s/$key/${key_old:-$key}/" "$work/post-key.lua" > "$work/post-key-old.lua"
# A row is only worth its number when the request it repeats succeeds: a refused one (a
# key the instance does not know) is answered without the work the row stands for.
answers_200() { # answers_200 PORT KEY
  local status
  status=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' -H "x-token: $2" \
    -d '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000219ab540356cBB839Cbe05303d7705Fa","pending"]}' \
    "http://127.0.0.1:$1/rpc/eth")
  [ "$status" = 200 ] || { echo "bench: /rpc/eth on :$1 answered $status, not 200" >&2; exit 1; }
}
answers_200 $CE "$key"
[ -n "${BASELINE:-}" ] && answers_200 $CE_OLD "$key_old"

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

if [ -n "${HOLD:-}" ]; then
  echo "upstream :$UP  nginx :$NGX  bare :$BARE  floor :$FLOOR  chainedge :$CE (pid $ce_pid)  key $key  baseline key ${key_old:-none}  scripts $work" >&2
  # Until stopped, even if chainedge is restarted by hand (same config: $work/*.yaml).
  sleep infinity &
  pids+=($!)
  wait $!
  exit 0
fi
echo "bench: ${secs}s per run, $conns connections, $workers workers each" >&2
profile() { # profile NAME: perf for the length of one run, in the background
  if [ -n "${PROFILE:-}" ] && command -v perf >/dev/null; then
    perf record -q -F 499 -g -p "$ce_pid" -o "/tmp/chainedge-perf-$1.data" -- sleep "$secs" >/dev/null 2>&1 &
  fi
}
wait_perf() { [ -n "${PROFILE:-}" ] && sleep 1 || true; }
# The runs the targets compare, (b), (c) and (d), are interleaved over $rounds rounds and
# each reported by its median round: on a shared 2-core VM one run can be 10% off.
median() { printf '%s\n' "$@" | sort -g -k1,1 | awk -v n=$# 'NR == int((n + 1) / 2)'; }
rps_list() { local out=""; for r in "$@"; do out+="${r%% *} "; done; echo "${out% }"; }
a=$(run direct "http://127.0.0.1:$UP/" "$work/post.lua")
b0=$(run nginx_nolog "http://127.0.0.1:$NGX0/" "$work/post.lua")
c0=$(run bare "http://127.0.0.1:$BARE/" "$work/post.lua")
c1=$(run floor "http://127.0.0.1:$FLOOR/" "$work/post.lua")
bs=(); cs=(); ds=(); hs=(); cos=(); dos=()
for round in $(seq 1 "$rounds"); do
  bs+=("$(run "nginx_$round" "http://127.0.0.1:$NGX/" "$work/post.lua")")
  hs+=("$(run "hyper_$round" "http://127.0.0.1:$HYPER/" "$work/post.lua")")
  [ "$round" = 1 ] && profile c
  cs+=("$(run "passthrough_$round" "http://127.0.0.1:$CE/bench/plain/" "$work/post.lua")")
  [ "$round" = 1 ] && wait_perf && profile d
  ds+=("$(run "rpc_$round" "http://127.0.0.1:$CE/rpc/eth" "$work/post-key.lua")")
  [ "$round" = 1 ] && wait_perf
  if [ -n "${BASELINE:-}" ]; then
    cos+=("$(run "passthrough_old_$round" "http://127.0.0.1:$CE_OLD/bench/plain/" "$work/post.lua")")
    dos+=("$(run "rpc_old_$round" "http://127.0.0.1:$CE_OLD/rpc/eth" "$work/post-key-old.lua")")
  fi
done
b=$(median "${bs[@]}"); c=$(median "${cs[@]}"); d=$(median "${ds[@]}"); c3=$(median "${hs[@]}")
c2=$(run beacon "http://127.0.0.1:$CE/rpc/eth-beacon/eth/v1/node/version" "$work/key.lua")
e=$(run local "http://127.0.0.1:$CE/console/app.js")
ce_hwm=$(hwm_kib "$ce_pid")
# shellcheck disable=SC2046
ngx_hwm=$(sum_kib hwm_kib $(nginx_pids nginx))
bare_hwm=$(hwm_kib "$bare_pid")

read -r ar ap50 ap99 <<<"$a"; read -r br bp50 bp99 <<<"$b"; read -r b0r b0p50 b0p99 <<<"$b0"; read -r cr cp50 cp99 <<<"$c"
read -r c2r c2p50 c2p99 <<<"$c2"; read -r dr dp50 dp99 <<<"$d"; read -r er ep50 ep99 <<<"$e"; read -r c0r c0p50 c0p99 <<<"$c0"
read -r c1r c1p50 c1p99 <<<"$c1"; read -r c3r c3p50 c3p99 <<<"$c3"

# Added latency at 50% of (d)'s peak: oha holds a fixed request rate (open model, with
# coordinated-omission correction) against (d) and against the upstream directly.
half=$(awk -v x="$dr" 'BEGIN{printf "%d", x/2}')
fixed() { # fixed NAME URL [-H header] -> p50_ms
  local name=$1 url=$2; shift 2
  oha --no-tui --output-format json -z "${secs}s" -c 32 -q "$half" --latency-correction \
    -m POST -H "Content-Type: application/json" "$@" \
    -d '{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x00000000219ab540356cBB839Cbe05303d7705Fa","pending"]}' "$url" > "$work/$name.json" 2>/dev/null || true
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["latencyPercentiles"]; print("%.3f %.3f %.0f" % (p["p50"]*1000, p["p99"]*1000, d["summary"]["requestsPerSec"]))' "$work/$name.json" 2>/dev/null || echo "n/a n/a n/a"
}
read -r dh50 dh99 dhr <<<"$(fixed rpc_half "http://127.0.0.1:$CE/rpc/eth" -H "x-token: $key")"
read -r ah50 ah99 ahr <<<"$(fixed direct_half "http://127.0.0.1:$UP/")"
# The same rate through nginx and bare Pingora, for what a proxy hop costs at all here.
read -r bh50 bh99 bhr <<<"$(fixed nginx_half "http://127.0.0.1:$NGX/")"
read -r c0h50 c0h99 c0hr <<<"$(fixed bare_half "http://127.0.0.1:$BARE/")"
added=$(awk -v x="$dh50" -v y="$ah50" 'BEGIN{ if (x == "n/a" || y == "n/a") print "n/a"; else printf "%.3f", x-y }')

# Memory for 1,000 open SSE streams, then for 10,000 idle keep-alive client connections
# (each after one request): RSS with them held minus RSS just before.
streams=1000
ce_sse=$(held_kib "$ce_pid" $CE "/rpc/eth-beacon/eth/v1/events?topics=head" $streams "x-token: $key")
ngx_sse=$(held_kib "$(nginx_pids nginx)" $NGX "/eth/v1/events?topics=head" $streams)
sleep 2
idle=10000
ce_idle=$(held_kib "$ce_pid" $CE /rpc/eth-beacon/eth/v1/node/version $idle "x-token: $key")
ngx_idle=$(held_kib "$(nginx_pids nginx)" $NGX /eth/v1/node/version $idle)
# The same again once those closed: what a connection costs when the allocator already
# holds the memory the first ones' requests passed through (the steady state).
sleep 2
ce_idle2=$(held_kib "$ce_pid" $CE /rpc/eth-beacon/eth/v1/node/version $idle "x-token: $key")
ngx_idle2=$(held_kib "$(nginx_pids nginx)" $NGX /eth/v1/node/version $idle)
per_conn() { awk -v k="$1" -v n="$2" 'BEGIN{ if (k ~ /^-?[0-9]+$/) printf "%.1f", k/n; else print "n/a" }'; }

ratio() { awk -v x="$1" -v y="$2" 'BEGIN{ if (y > 0) printf "%.3f", x/y; else print "n/a" }'; }

baseline_rows=""
if [ -n "${BASELINE:-}" ]; then
  co=$(median "${cos[@]}"); do_=$(median "${dos[@]}")
  read -r cor cop50 cop99 <<<"$co"; read -r dor dop50 dop99 <<<"$do_"
  baseline_rows="
A/B against \`BASELINE\` ($BASELINE), interleaved in the same rounds (requests/s, p50 / p99 ms):
(c) this build $cr ($cp50 / $cp99), baseline $cor ($cop50 / $cop99): $(ratio "$cr" "$cor");
(d) this build $dr ($dp50 / $dp99), baseline $dor ($dop50 / $dop99): $(ratio "$dr" "$dor").
Baseline rounds: (c) $(rps_list "${cos[@]}"); (d) $(rps_list "${dos[@]}").
"
fi

cat > bench/RESULTS.md <<MD
# Benchmark results

\`bench/run.sh $secs $conns\` on $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), loopback only, $scheduling.
wrk, $workers threads, $conns connections, ${secs}s per run, (b)/(c3)/(c)/(d) interleaved over $rounds rounds. The load generator, the
upstream and the proxy share the two cores. nginx: $workers workers, keep-alive (128) to
the upstream. Pingora (bare) and chainedge: $workers worker threads
(chainedge \`work_stealing: ${WORK_STEALING:-false}\`). chainedge and the Rust references are built with Cargo
profile \`$build_profile\` (\`dist\`: fat LTO).

| run | requests/s | p50 ms | p99 ms |
|---|---|---|---|
| (a) direct to the static upstream | $ar | $ap50 | $ap99 |
| (b) nginx reverse proxy (buffered access log, as chainedge logs) | $br | $bp50 | $bp99 |
| (b0) nginx reverse proxy with \`access_log off\` | $b0r | $b0p50 | $b0p99 |
| (c0) Pingora with no chainedge logic (\`examples/bare_proxy.rs\`): the framework floor | $c0r | $c0p50 | $c0p99 |
| (c1) a minimal tokio proxy (\`examples/tokio_floor.rs\`: no routing, pool, timeouts or log): the runtime floor | $c1r | $c1p50 | $c1p99 |
| (c3) hyper's HTTP/1.1 server and client as a proxy (\`examples/hyper_floor.rs\`: library framing on both sides, no routing or log) | $c3r | $c3p50 | $c3p99 |
| (c) chainedge plain passthrough (route \`passthrough\`, no key, no limit; lean front) | $cr | $cp50 | $cp99 |
| (c2) chainedge beacon passthrough (key auth, rate limit, beacon path policy) | $c2r | $c2p50 | $c2p99 |
| (d) chainedge \`/rpc/eth\` (key auth, rate limit, method table, gateway; a read the cache never keeps) | $dr | $dp50 | $dp99 |
| (e) chainedge local handler (\`/console/app.js\` from memory) | $er | $ep50 | $ep99 |

Rounds (requests/s; the table shows each one's median round): (b) $(rps_list "${bs[@]}");
(c3) $(rps_list "${hs[@]}"); (c) $(rps_list "${cs[@]}"); (d) $(rps_list "${ds[@]}").
$baseline_rows
| ratio | value | target |
|---|---|---|
| (c)/(b) requests/s | $(ratio "$cr" "$br") | ≥ 1.0 |
| (c)/(b0) requests/s: against nginx logging nothing | $(ratio "$cr" "$b0r") | — |
| (c)/(c0) requests/s: chainedge over bare Pingora | $(ratio "$cr" "$c0r") | — |
| (c)/(c1) requests/s: chainedge against the minimal tokio proxy | $(ratio "$cr" "$c1r") | — |
| (c3)/(b) requests/s: hyper's framing on both sides against nginx | $(ratio "$c3r" "$br") | — |
| (c)/(c3) requests/s: chainedge against the hyper proxy | $(ratio "$cr" "$c3r") | — |
| (c2)/(c) requests/s: what key auth, limits and the beacon policy cost | $(ratio "$c2r" "$cr") | — |
| (d)/(c) requests/s | $(ratio "$dr" "$cr") | ≥ 0.8 |
| (d) − (a) p50 at $half req/s (50% of (d)'s peak), oha fixed rate | ${added} ms ((d) $dh50 ms at $dhr req/s, (a) $ah50 ms) | ≤ 0.5 ms |

At that fixed rate (oha, 32 connections, coordinated-omission corrected), p50 / p99 ms:
(a) direct $ah50 / $ah99; (b) nginx $bh50 / $bh99; (c0) bare Pingora $c0h50 / $c0h99;
(d) chainedge \`/rpc/eth\` $dh50 / $dh99.

Peak memory (VmHWM) after the runs above: chainedge $ce_hwm KiB; nginx proxy (master +
workers) $ngx_hwm KiB; bare Pingora $bare_hwm KiB.

| held connections (RSS added while held) | chainedge | nginx proxy |
|---|---|---|
| $idle idle keep-alive client connections | $ce_idle KiB ($(per_conn "$ce_idle" $idle) KiB each) | $ngx_idle KiB ($(per_conn "$ngx_idle" $idle) KiB each) |
| $idle idle keep-alive client connections again, after the first closed | $ce_idle2 KiB ($(per_conn "$ce_idle2" $idle) KiB each) | $ngx_idle2 KiB ($(per_conn "$ngx_idle2" $idle) KiB each) |
| $streams open SSE streams (beacon events, upstream connection each) | $ce_sse KiB ($(per_conn "$ce_sse" $streams) KiB each) | $ngx_sse KiB ($(per_conn "$ngx_sse" $streams) KiB each) |
MD
cat bench/RESULTS.md
