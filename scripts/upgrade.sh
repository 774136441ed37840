#!/usr/bin/env bash
# Graceful upgrade of a running chainedge (a new binary, or a change a reload cannot
# apply: listeners, store, cluster, console, captures). Checks the configuration, starts
# the new process with -u (it takes the listening sockets over from upgrade_sock), then
# tells the old one to hand them over and drain (SIGQUIT). No request is dropped
# (docs/operations.md).
#   scripts/upgrade.sh [pingora.yaml] [app.yaml]   (defaults: /etc/chainedge/...)
set -euo pipefail
bin=${CHAINEDGE_BIN:-/usr/bin/chainedge}
server=${1:-/etc/chainedge/pingora.yaml}
app=${2:-/etc/chainedge/chainedge.yaml}
pid_file=$(sed -n 's/^pid_file: *//p' "$server" | tr -d '"')
old=$(cat "${pid_file:-/run/chainedge/chainedge.pid}")
"$bin" -t -c "$server" --app "$app" >/dev/null
"$bin" -u -d -c "$server" --app "$app"
kill -QUIT "$old"
echo "upgrade: new process started; $old hands over and drains"
