#!/usr/bin/env python3
"""Regenerate tests/data/execution-apis-requests.jsonl from a checkout of
ethereum/execution-apis: every `>>` request line of tests/*/*.io, one JSON object per
line, {"case": "<dir>/<file without .io>", "request": <the request>}.

    python3 scripts/execution-apis-requests.py ../execution-apis > tests/data/execution-apis-requests.jsonl
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1]) / "tests"
for path in sorted(root.glob("*/*.io")):
    case = str(path.relative_to(root))[: -len(".io")]
    for line in path.read_text().splitlines():
        if line.startswith(">> "):
            request = json.loads(line[3:])
            print(json.dumps({"case": case, "request": request}, separators=(",", ":")))
