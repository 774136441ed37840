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
}

# Write a results table to stdout and to bench/<file>, headed by the date and the box.
publish() {
  local file=$1
  {
    echo "<!-- $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r) -->"
    cat
  } | tee "bench/$file"
}
