#!/usr/bin/env bash
# Event-stream (SSE) memory, loopback only: N clients on beacon events through chainedge
# (one shared node stream for all) against nginx proxying the same stream (one node
# connection per client), in one run. Writes the table to stdout (bench/RESULTS-sse.md).
#
#   bench/sse.sh [clients, default 1000]
#
# Rows: RSS added per client while N are held (each got its head; the node sends a
# keep-alive comment every 10 s), and the node connections each proxy holds for them.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n=${1:-1000}
command -v nginx >/dev/null || { echo "sse: needs nginx" >&2; exit 2; }
bin=${BIN:-target/dist/chainedge}
[ -x "$bin" ] || cargo build --profile dist -q --bin chainedge
ulimit -n 65536 2>/dev/null || true
NODE=19401; NGX=19402; CE=19403; CEM=19404
work=$(mktemp -d /tmp/chainedge-sse.XXXXXX)
pids=()
cleanup() { stop_all; rm -rf "$work"; }
trap cleanup EXIT

python3 bench/sse_upstream.py $NODE &
pids+=($!)
cat > "$work/nginx.conf" <<NGINX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  server {
    listen 127.0.0.1:$NGX backlog=4096;
    location /eth/v1/events {
      proxy_pass http://127.0.0.1:$NODE;
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 1h;
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
  categories:
    eth_beacon: {basic: 1000000}
pools:
  eth_cl:
    hosts:
      - {id: cl, url: "http://127.0.0.1:$NODE", family: cl-lighthouse}
YAML
pingora_yaml
tenant=$($bin --app "$work/app.yaml" tenants create --name bench --plan basic)
key=$($bin --app "$work/app.yaml" keys create --tenant "$tenant" 2>/dev/null)
$bin -c "$work/pingora.yaml" --app "$work/app.yaml" >/dev/null 2>>"$work/chainedge.log" &
ce_pid=$!; pids+=($ce_pid)
for p in $NODE $NGX $CE; do
  wait_port $p
done
sleep 2
probe=$(curl -s -m 2 -o "$work/probe" -w '%{http_code}' -H "x-token: $key" "http://127.0.0.1:$CE/rpc/eth-beacon/eth/v1/events?topics=head" || true)
[ "$probe" = 200 ] || { echo "sse: chainedge answered $probe: $(cat "$work/probe")" >&2; exit 1; }

rss_kib() { local t=0; for p in $1; do t=$((t + $(awk '/VmRSS/ {print $2}' /proc/$p/status))); done; echo $t; }
nginx_pids() { pgrep -f "nginx: worker process" | tr '\n' ' '; pgrep -f "nginx: master process nginx -c $work" | tr '\n' ' '; }
node_conns() { ss -Htn state established "( dport = :$NODE )" | wc -l; }

# held NAME "PIDS" PORT PATH [header]: "KiB per client|node connections" while N are held.
held() {
  local name=$1 procs=$2 port=$3 path=$4; shift 4
  local fifo="$work/fifo.$name"; mkfifo "$fifo"
  local before; before=$(rss_kib "$procs")
  python3 bench/hold_conns.py "$port" "$path" "$n" "$@" < "$fifo" > "$work/out.$name" 2>&1 &
  local holder=$!
  exec 7>"$fifo"
  for _ in $(seq 600); do grep -q '^held' "$work/out.$name" && break; ! kill -0 $holder 2>/dev/null && break; sleep 0.1; done
  grep -q '^held' "$work/out.$name" || { cat "$work/out.$name" >&2; exit 1; }
  sleep 1
  local after; after=$(rss_kib "$procs")
  local conns; conns=$(node_conns)
  exec 7>&-
  wait $holder 2>/dev/null || true
  printf '%s|%s\n' "$(awk -v a="$after" -v b="$before" -v n="$n" 'BEGIN {printf "%.1f", (a - b) / n}')" "$conns"
}

ce=$(held ce "$ce_pid" $CE "/rpc/eth-beacon/eth/v1/events?topics=head" "x-token: $key")
sleep 2
ngx=$(held ngx "$(nginx_pids)" $NGX "/eth/v1/events?topics=head")
col() { echo "$1" | cut -d'|' -f"$2"; }
publish RESULTS-sse.md <<MD
Beacon events (SSE), $n clients, $(date -u +%Y-%m-%d) ($(basename "$bin"), 2 worker threads; nginx 2 workers):

| | chainedge | nginx |
|---|---|---|
| RSS added per client | $(col "$ce" 1) KiB | $(col "$ngx" 1) KiB |
| node connections for $n clients | $(col "$ce" 2) | $(col "$ngx" 2) |
MD
