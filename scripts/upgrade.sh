#!/usr/bin/env bash
# Graceful upgrade of a running chainedge (a new binary, or a change a reload cannot
# apply: listeners, store, cluster, console, captures). Checks the configuration, starts
# the new process with -u -d (it detaches, binds upgrade_sock and waits there for the
# listening sockets), tells the old one to hand them over and drain (SIGQUIT) once the
# new one is waiting, then waits for the old one to go and checks the new one serves.
# No request is dropped (docs/operations.md).
#   scripts/upgrade.sh [pingora.yaml] [app.yaml]   (defaults: /etc/chainedge/...)
# Exit status 0: the new process serves and its pid is in pid_file; otherwise the old
# one was left serving (or, past the hand-over, the reason is printed).
set -euo pipefail
bin=${CHAINEDGE_BIN:-/usr/bin/chainedge}
server=${1:-/etc/chainedge/pingora.yaml}
app=${2:-/etc/chainedge/chainedge.yaml}
# How long to wait for the new process to bind upgrade_sock, and for the old to leave.
ready_secs=${UPGRADE_READY_SECS:-10}
drain_secs=${UPGRADE_DRAIN_SECS:-60}
setting() { sed -n "s/^$1: *//p" "$server" | tr -d '"' | head -n 1; }
pid_file=$(setting pid_file); pid_file=${pid_file:-/tmp/pingora.pid}
sock=$(setting upgrade_sock); sock=${sock:-/tmp/pingora_upgrade.sock}
old=$(cat "$pid_file")
kill -0 "$old" 2>/dev/null || { echo "upgrade: no process $old (from $pid_file) is running" >&2; exit 1; }
"$bin" -t -c "$server" --app "$app" >/dev/null

# The new process binds upgrade_sock afresh: a socket file left from an earlier upgrade
# would read as "ready" before it is.
rm -f "$sock"
# The access log is stdout: the new process writes it (and its errors) where the old one
# does when that is a file; otherwise to this script's own (under systemd, point stdout
# at a file, or run this from a unit of its own; docs/operations.md).
out=$(readlink "/proc/$old/fd/1" 2>/dev/null || true)
err=$(readlink "/proc/$old/fd/2" 2>/dev/null || true)
if [ -f "$out" ]; then exec 3>>"$out"; else exec 3>&1; fi
if [ -f "$err" ]; then exec 4>>"$err"; else exec 4>&2; fi
"$bin" -u -d -c "$server" --app "$app" </dev/null >&3 2>&4 3>&- 4>&- &
launcher=$!
exec 3>&- 4>&-
# The -d parent exits as soon as the new process has detached (pid file written).
if ! wait "$launcher"; then
  echo "upgrade: the new process failed to start (see error_log); $old keeps serving" >&2
  exit 1
fi
new=""
for _ in $(seq $((ready_secs * 20))); do
  new=$(cat "$pid_file" 2>/dev/null || true)
  if [ -n "$new" ] && [ "$new" != "$old" ] && [ -S "$sock" ]; then break; fi
  sleep 0.05
done
if [ -z "$new" ] || [ "$new" = "$old" ] || [ ! -S "$sock" ] || ! kill -0 "$new" 2>/dev/null; then
  [ -n "$new" ] && [ "$new" != "$old" ] && kill "$new" 2>/dev/null
  echo "upgrade: the new process did not wait on $sock within ${ready_secs}s; $old keeps serving" >&2
  exit 1
fi
kill -QUIT "$old"
echo "upgrade: $new started; $old hands over its sockets and drains"
for _ in $(seq $((drain_secs * 10))); do
  kill -0 "$old" 2>/dev/null || break
  sleep 0.1
done
if ! kill -0 "$new" 2>/dev/null; then
  echo "upgrade: $new exited (see error_log)" >&2
  exit 1
fi
if kill -0 "$old" 2>/dev/null; then
  echo "upgrade: $new serves; $old still draining after ${drain_secs}s (it exits by itself)"
else
  echo "upgrade: $new serves; $old has exited"
fi
