#!/usr/bin/env bash
# Rebuild Tokens.json from Tokens.sol with solc 0.8.28 from npm (not needed to run the
# tests: the output is checked in).
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm install -q solc@0.8.28 >/dev/null)
"$tmp/node_modules/.bin/solcjs" --bin --optimize --output-dir "$tmp/out" Tokens.sol >/dev/null
python3 - "$tmp/out" > Tokens.json <<'PY'
import json, os, sys
out = sys.argv[1]
bins = {}
for f in sorted(os.listdir(out)):
    if f.endswith(".bin"):
        name = f.rsplit("_", 1)[-1][:-4]
        bins[name] = "0x" + open(os.path.join(out, f)).read().strip()
print(json.dumps({"compiler": "solc 0.8.28+commit.7893614a (npm solc, --optimize)", "source": "Tokens.sol", "bytecode": bins}, indent=1))
PY
