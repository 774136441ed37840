#!/usr/bin/env python3
"""The RustSec advisory check, offline: every crate version in Cargo.lock against an
advisory database on disk (`../shared/advisory-db` by default, a snapshot of
github.com/rustsec/advisory-db; these machines cannot fetch it).

Why not `cargo audit` / `cargo deny`: CI runs on a fresh machine, where installing
either compiles a few hundred crates (cargo-audit: several minutes on 2 cores) on every
run; this reads the same files in well under a second.

An advisory applies when the locked version matches none of its `patched` and
`unaffected` requirements (Cargo's semver rules: `^` for a bare version, `~`, `=`,
comparisons, comma for "and"); withdrawn advisories are skipped. Every advisory that
applies, vulnerability or informational (unmaintained, unsound), fails the check unless
`.ci/advisories-accepted.toml` lists its id with the reason it is accepted; an accepted
id that no longer applies is reported so the list stays true.

Exit status: 0 clean, 1 an advisory not accepted, 2 no database.
"""

import argparse
import os
import re
import sys
import tomllib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def version(text):
    """(major, minor, patch, pre) with missing parts as 0; pre sorts before release."""
    core, _, pre = text.strip().partition("-")
    core = core.split("+")[0]
    parts = [int(p) for p in core.split(".") if p != ""]
    while len(parts) < 3:
        parts.append(0)
    # A pre-release sorts before its release: compare (0, pre) < (1, "").
    return (parts[0], parts[1], parts[2], (0, pre) if pre else (1, ""))


def caret_upper(parts):
    """The exclusive bound of `^parts` (Cargo: the left-most non-zero part given)."""
    major, minor, patch = (parts + [None, None])[:3]
    if major > 0 or minor is None:
        return (major + 1, 0, 0, (0, ""))
    if minor > 0 or patch is None:
        return (0, minor + 1, 0, (0, ""))
    return (0, 0, patch + 1, (0, ""))


def tilde_upper(parts):
    major, minor = (parts + [None])[:2]
    if minor is None:
        return (major + 1, 0, 0, (0, ""))
    return (major, minor + 1, 0, (0, ""))


def satisfies(v, req):
    """Whether version tuple `v` meets one requirement string (comma: all parts)."""
    for clause in req.split(","):
        clause = clause.strip()
        if not clause or clause == "*":
            continue
        m = re.fullmatch(r"(>=|<=|>|<|=|\^|~)?\s*([0-9][0-9A-Za-z.+-]*)", clause)
        if not m:
            raise ValueError(f"unreadable requirement {req!r}")
        op, text = m.group(1) or "^", m.group(2)
        given = [int(p) for p in text.split("-")[0].split("+")[0].split(".")]
        low = version(text)
        ok = {
            ">=": v >= low,
            ">": v > low,
            "<=": v <= low,
            "<": v < low,
            "=": v[:3] == low[:3] and v[3] == low[3],
            "^": low <= v < caret_upper(given),
            "~": low <= v < tilde_upper(given),
        }[op]
        if not ok:
            return False
    return True


def advisories(db):
    """Every advisory of the database: (front matter as a dict, file path)."""
    crates = os.path.join(db, "crates")
    for name in sorted(os.listdir(crates)):
        folder = os.path.join(crates, name)
        for f in sorted(os.listdir(folder)):
            if not f.endswith(".md"):
                continue
            path = os.path.join(folder, f)
            text = open(path, encoding="utf-8").read()
            m = re.search(r"```toml\n(.*?)\n```", text, re.S)
            if m:
                adv = tomllib.loads(m.group(1))
                title = re.search(r"^# (.+)$", text[m.end():], re.M)
                adv.setdefault("advisory", {}).setdefault("title", title.group(1) if title else "")
                yield adv, path


def applies(adv, v):
    versions = adv.get("versions", {})
    reqs = versions.get("patched", []) + versions.get("unaffected", [])
    return not any(satisfies(v, r) for r in reqs)


def self_test():
    """Cargo's requirement rules on the shapes the database uses."""
    cases = [
        ("1.2.3", ">= 1.2.3", True), ("1.2.2", ">= 1.2.3", False),
        ("0.9.5", "^0.9", True), ("0.10.0", "^0.9", False), ("0.9.5", "0.9.6", False),
        ("0.0.3", "^0.0.3", True), ("0.0.4", "^0.0.3", False), ("1.9.0", "1.2", True),
        ("2.0.0", "1.2", False), ("0.3.7", "< 0.4.0, >= 0.3.5", True),
        ("0.4.0", ">= 0.3.5, < 0.4.0", False), ("1.2.9", "~1.2.3", True),
        ("1.3.0", "~1.2.3", False), ("3.7.2", ">=3.7.2", True), ("1.0.0-alpha.1", ">= 1.0.0", False),
        ("1.0.0", "= 1.0.0", True), ("2.28.0", ">= 3.7.2", False),
    ]
    for v, req, want in cases:
        assert satisfies(version(v), req) == want, (v, req, want)
    print(f"advisories: self-test of {len(cases)} requirement cases passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=os.path.join(ROOT, "..", "shared", "advisory-db"))
    ap.add_argument("--lock", default=os.path.join(ROOT, "Cargo.lock"))
    ap.add_argument("--accepted", default=os.path.join(ROOT, ".ci", "advisories-accepted.toml"))
    ap.add_argument("--self-test", action="store_true", help="check the requirement rules and exit")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    if not os.path.isdir(os.path.join(args.db, "crates")):
        print(f"advisories: no database at {args.db}", file=sys.stderr)
        return 2
    locked = {}
    for p in tomllib.load(open(args.lock, "rb")).get("package", []):
        if p.get("source", "").startswith("registry+"):
            locked.setdefault(p["name"], []).append(p["version"])
    accepted = {}
    if os.path.exists(args.accepted):
        accepted = tomllib.load(open(args.accepted, "rb")).get("accepted", {})
    found, refused = set(), 0
    for adv, path in advisories(args.db):
        a = adv.get("advisory", {})
        if a.get("withdrawn") or a.get("package") not in locked:
            continue
        for ver in locked[a["package"]]:
            if not applies(adv, version(ver)):
                continue
            kind = a.get("informational") or "vulnerability"
            found.add(a["id"])
            line = f"{a['id']} {a['package']} {ver} ({kind}): {a.get('title', os.path.basename(path))}"
            if a["id"] in accepted:
                print(f"accepted {line}\n  because: {accepted[a['id']]}")
            else:
                refused += 1
                print(f"REFUSED  {line}\n  {a.get('url', '')}")
    for stale in sorted(set(accepted) - found):
        print(f"note: {stale} is accepted but no longer applies; remove it from {args.accepted}")
    print(f"advisories: {len(locked)} crates checked, {len(found)} advisories apply, {refused} not accepted")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
