#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks for building, the demo and the tests.
# Idempotent: each step checks first. Needs root (or sudo) only for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_pkgs=()
command -v cmake >/dev/null || apt_pkgs+=(cmake)
# OpenSSL from the system, not compiled (.cargo/config.toml), found by pkg-config.
command -v pkg-config >/dev/null || apt_pkgs+=(pkg-config)
[ -f /usr/include/openssl/ssl.h ] || apt_pkgs+=(libssl-dev)
command -v promtool >/dev/null || apt_pkgs+=(prometheus)
command -v curl >/dev/null || apt_pkgs+=(curl)
[ -x /usr/bin/chromium ] || apt_pkgs+=(chromium)
# The PostgreSQL store's tests start their own server (tests/harness/src/postgres.rs).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || apt_pkgs+=(postgresql)
# ... and their own Redis (tests/harness/src/redis.rs).
command -v redis-server >/dev/null || apt_pkgs+=(redis-server)
# Real proxies in front of the edge (tests/cluster.rs, tests/security.rs).
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || apt_pkgs+=(haproxy)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || apt_pkgs+=(nginx)
# nginx's stream module: an L4 proxy writing the PROXY protocol (tests/proxy_protocol.rs).
[ -f /usr/lib/nginx/modules/ngx_stream_module.so ] || apt_pkgs+=(libnginx-mod-stream)
# A Go JSON-RPC node on go-ethereum's request decoding (tests/gonode, tests/one_reading.rs).
command -v go >/dev/null || apt_pkgs+=(golang-go)
if ((${#apt_pkgs[@]})); then
  echo "setup: apt-get install ${apt_pkgs[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}" >/dev/null
fi

# A real Ethereum JSON-RPC node (anvil), Playwright and axe-core (browser tests: the
# console driven in Chromium, and checked for accessibility), ethers and viem
# (docs/examples.md is run by the tests) and Lodestar's light client (the beacon
# stand-in's light-client data is checked by it) from npm, into the repository. One
# install command: a later --no-save install would prune the others.
if [ ! -x node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil ] || [ ! -d node_modules/playwright-core ] \
   || [ ! -d node_modules/ethers ] || [ ! -d node_modules/viem ] || [ ! -d node_modules/@lodestar/light-client ] \
   || [ ! -f node_modules/axe-core/axe.min.js ]; then
  echo "setup: npm install anvil playwright-core axe-core ethers viem @lodestar/light-client"
  npm install --no-save --no-audit --no-fund --loglevel=error @foundry-rs/anvil-linux-amd64 playwright-core axe-core@4 ethers@6 viem@2 @lodestar/light-client@1.28.1 >/dev/null
fi

# Python test clients (web3.py, eth-account) and the API contract tester (schemathesis) in a venv.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import web3, eth_account, aiosmtpd, nacl, sseclient, solders, websockets, schemathesis, yaml, jsonschema_rs, py_ecc, remerkleable' 2>/dev/null; then
  echo "setup: python venv (web3, eth-account, aiosmtpd, PyNaCl, solders, websockets, schemathesis, py-ecc, remerkleable)"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
fi
# The test runner `make test` uses: every test its own process, tests of different
# binaries side by side (.config/nextest.toml).
command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked -q
echo "setup: ok"
