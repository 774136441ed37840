# The allocator setting the systemd unit ships (systemd/chainedge.service): the benches
# measure the edge as it runs in production.
export MIMALLOC_ARENA_EAGER_COMMIT="${MIMALLOC_ARENA_EAGER_COMMIT:-0}"

# One scheduling weight per thread while a bench runs. With the kernel's autogroups on
# (the default) each session shares CPU as one group: PostgreSQL's backends each call
# setsid() and so get a share of their own, while the edge and the load generator, both
# started by the script, split one between them; under contention that halved the
# PostgreSQL read rows (11-13k req/s against 24k with autogroups off, the same edge and
# store) and weighs proxies that daemonize (nginx) against ones that do not. Turned off
# for the run when we may (root), put back by `stop_all`; the results say which.
autogroup=/proc/sys/kernel/sched_autogroup_enabled
autogroup_was=$(cat "$autogroup" 2>/dev/null || echo "")
restore_scheduling() { [ "$autogroup_was" = 1 ] && echo 1 2>/dev/null > "$autogroup" || true; }
if [ "$autogroup_was" = 1 ] && echo 0 2>/dev/null > "$autogroup"; then
  scheduling="autogroups off for the run"
  # Until the script sets its own cleanup (which calls `stop_all`, which restores).
  trap restore_scheduling EXIT
elif [ "$autogroup_was" = 1 ]; then
  scheduling="autogroups on (not root: the PostgreSQL rows read low, see docs/benchmarks.md)"
else
  scheduling="autogroups off"
fi

# Shared by the bench scripts (sourced): stop every process a script started and wait
# until each is gone, so that no node, proxy or edge outlives the script that ran it.
#
# The script keeps the pids it starts in `pids`; `stop_all` asks each to stop (SIGINT:
# Pingora's fast shutdown, nginx's and anvil's quick exit), waits up to 5 s for all of
# them, then kills what is left and reaps it.
stop_all() {
  local p alive
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  restore_scheduling
}

# Stop the script unless every port given is free: another bench or a demo holding one
# would answer in its place.
ports_free() {
  local p
  for p in "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "bench: port $p is busy" >&2; exit 1; fi
  done
}

# Wait up to TENTHS tenths of a second (default 100) until something listens on PORT.
wait_port() {
  local port=$1 tenths=${2:-100}
  for _ in $(seq 1 "$tenths"); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0; sleep 0.1; done
  echo "bench: nothing listens on port $port after $((tenths / 10)) s" >&2
  return 1
}

# Write a results table to stdout and to bench/<file>, headed by the date and the box.
publish() {
  local file=$1
  {
    echo "<!-- $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $scheduling -->"
    cat
  } | tee "bench/$file"
}

# Pingora's own YAML for an edge whose state lives in $work.
pingora_yaml() {
  cat > "$work/pingora.yaml" <<YAML
version: 1
threads: 2
pid_file: $work/chainedge.pid
upgrade_sock: $work/upgrade.sock
YAML
}

# The app YAML of an edge indexing the anvil at $NODE from block 0 (listening on $CE,
# metrics on $CEM, rate limits out of the way); $1 is the `store:` section's body.
index_app_yaml() {
  cat > "$work/app.yaml" <<YAML
plugins: $PWD/plugins
listen:
  http: ["127.0.0.1:$CE"]
metrics:
  listen: "127.0.0.1:$CEM"
store:
$1
plans: [free, basic, pro, business, enterprise, scale]
threads: 2
limits:
  default: {anonymous: 10000000, free: 10000000, basic: 10000000, pro: 10000000, business: 10000000, enterprise: 10000000, scale: 10000000}
health:
  interval_ms: 500
index:
  eth:
    start_block: 0
    batch_blocks: ${BATCH:-50}
    poll_ms: 200
pools:
  eth_el:
    hosts:
      - {id: anvil, url: "http://127.0.0.1:$NODE", family: el-anvil}
YAML
}

# edge_app NAME PORT METRICS_PORT: an edge's app YAML in $work/NAME.yaml: its listener,
# metrics, its own SQLite store, every plan, rate limits out of the way, then the
# caller's own sections (stdin: health, rpc, pools, ...). `threads` from $threads (2).
edge_app() {
  { cat <<YAML
plugins: $PWD/plugins
listen:
  http: ["127.0.0.1:$2"]
metrics:
  listen: "127.0.0.1:$3"
store:
  path: $work/$1.db
plans: [free, basic, pro, business, enterprise, scale]
threads: ${threads:-2}
limits:
  default: {anonymous: 10000000, free: 10000000, basic: 10000000, pro: 10000000, business: 10000000, enterprise: 10000000, scale: 10000000}
YAML
    cat; } > "$work/$1.yaml"
}

# edge_pingora NAME: Pingora's YAML for the edge NAME in $work/NAME-pingora.yaml.
edge_pingora() {
  cat > "$work/$1-pingora.yaml" <<YAML
version: 1
threads: ${threads:-2}
work_stealing: false
pid_file: $work/$1.pid
upgrade_sock: $work/$1.sock
YAML
}

# Stop the process started last and forget it.
stop_last() {
  local p=${pids[-1]}
  kill -INT "$p" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  unset 'pids[-1]'
}

# nginx_conf NAME: an nginx instance's configuration in $work/NAME.conf: its main-context
# lines ($workers workers; `worker_rlimit_nofile` when the script set $nofile), then its
# http block (stdin). The upstream and the reference proxy are instances of their own.
nginx_conf() {
  { cat <<NGINX
worker_processes $workers;
${nofile:+worker_rlimit_nofile $nofile;}
pid $work/$1.pid;
error_log $work/$1-error.log warn;
events { worker_connections 16384; }
NGINX
    cat; } > "$work/$1.conf"
}

# The static node of the JSON-RPC benches: nginx answering every call at once on $UP
# ($work/upstream.conf; started by the caller).
nginx_static_node() {
  nginx_conf upstream <<NGINX
http {
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$UP backlog=4096;
    access_log off;
    default_type application/json;
    # A synced beacon node's answer to the health probe, for pools of beacon hosts.
    location = /eth/v1/node/syncing { return 200 '{"data":{"head_slot":"100","sync_distance":"0","is_syncing":false}}'; }
    location / { return 200 '{"jsonrpc":"2.0","id":1,"result":"0x1"}'; }
  }
}
NGINX
}

# The reference proxy: nginx on $NGX proxying to $UP over kept-alive connections and
# logging every request in batches, as chainedge does ($work/nginx.conf). A separate
# instance from the node: an nginx proxying to its own workers would reach its upstream
# without waking another process, an advantage no proxy in front of a real node has.
nginx_reference_proxy() {
  nginx_conf nginx <<NGINX
http {
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  upstream node { server 127.0.0.1:$UP; keepalive 128; }
  server {
    listen 127.0.0.1:$NGX backlog=4096;
    access_log /dev/null combined buffer=64k flush=1s;
    location / { proxy_pass http://node; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
}

# distinct_reads FILE: 200,000 reads of different addresses at `pending`, one per line
# (oha -Z draws one per request): none kept by the cache, none shared in flight.
distinct_reads() {
  python3 - "$1" <<'PY'
import random, sys
random.seed(7)
with open(sys.argv[1], "w") as f:
    for n in range(200_000):
        a = "0x%08x%032x" % (random.getrandbits(31), n)
        f.write('{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["%s","pending"]}\n' % (n, a))
PY
}

# plugins_with_plain_route: the manifests in $work/plugins plus `bench.plain`, a route
# that proxies to eth_el without the gateway path (no key, no JSON-RPC).
plugins_with_plain_route() {
  mkdir -p "$work/plugins"
  cp plugins/*.yaml "$work/plugins/"
  cat >> "$work/plugins/eth.yaml" <<'ROUTE'
  - {name: bench.plain, methods: [GET, POST], path: "/bench/plain/{*rest}", handler: passthrough, credential: none, pool: eth_el}
ROUTE
}

# Memory of processes, in KiB from /proc: resident now, peak, summed over PIDS.
hwm_kib() { awk '/VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
sum_kib() { local f=$1 total=0; shift; for p in "$@"; do total=$((total + $($f "$p"))); done; echo $total; }
# nginx_pids NAME: the master plus its workers (children of the pid in its pid file).
nginx_pids() { local m; m=$(cat "$work/$1.pid"); echo "$m $(pgrep -P "$m" | tr '\n' ' ')"; }

# held_kib "PIDS" PORT PATH N [headers]: the RSS PIDS add while N client connections are
# held, each after one GET of PATH (bench/hold_conns.py), read 2 s after the last answer
# (what the requests left behind has settled); "n/a(why)" unless all N were answered.
held_kib() {
  local pids_=$1 port=$2 path=$3 n=$4; shift 4
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
