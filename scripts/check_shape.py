#!/usr/bin/env python3
"""The shape rules of src/, checked (CI runs this in `make lint`).

- Layers: `src/lib.rs` declares the top-level modules in groups under `// <Layer>.`
  comments, top to bottom. A module may import from its own layer or below, never
  from a layer above it.
- No import cycle between top-level modules, and none between the files of one folder.
- No file over 600 lines, no function over 100 lines.

An import is any `crate::a::b` path in the code (a `use` or a path in an expression),
read as text with comments and string literals removed. Exit status 1 with one line per
finding; `--quiet` prints nothing when all is well.
"""

import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
MAX_FILE_LINES = 600
MAX_FN_LINES = 100


def strip_code(text):
    """Blanks comments, string and char literals (keeping newlines) so that braces and
    paths are read from code only."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.compile(r'b?r(#*)"').match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2 : j]))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 1 : j - 1]))
            i = j + 1
            continue
        if c == "'":
            m = re.compile(r"'(\\.[^']*|[^\\'])'").match(text, i)
            if m:
                out.append("' '")
                i = m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def rust_files():
    for root, _, files in os.walk(SRC):
        for name in sorted(files):
            if name.endswith(".rs"):
                path = os.path.join(root, name)
                yield os.path.relpath(path, SRC), path


def module_of(rel):
    """src-relative file path -> its module path, e.g. edge/mod.rs -> ['edge']."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod" or parts[-1] in ("lib", "main"):
        parts = parts[:-1]
    return parts


def layers():
    """Top-level module -> (layer index, layer name, only the top may import it), from
    lib.rs's groups (a group's comment ending "imported only by the top" marks it)."""
    text = open(os.path.join(SRC, "lib.rs")).read()
    table, layer, index, top_only = {}, None, -1, False
    for line in text.splitlines():
        m = re.match(r"^// ([A-Z][\w ]*)[.:]", line)
        if m:
            layer, index = m.group(1), index + 1
            top_only = "imported only by the top" in line
            continue
        m = re.match(r"^(?:pub )?mod (\w+);", line)
        if m:
            if layer is None:
                sys.exit("check_shape: lib.rs declares a module before any layer")
            table[m.group(1)] = (index, layer, top_only)
    return table


CRATE_PATH = re.compile(r"\bcrate((?:::\w+)+)")


SUPER_PATH = re.compile(r"(?<![\w:])((?:super::)+|self::)(\w+(?:::\w+)*)")
USE_GROUP = re.compile(r"\buse\s+(crate|(?:super::)*super|self)::\{([^;]*)\};", re.S)


def imports(code, me):
    """Module paths this file names, from the crate root: crate::a::b::C -> ['a', 'b',
    'C']; super:: and self:: are resolved against the file's own module `me`."""

    def resolve(prefix, rest):
        if prefix == "crate":
            base = []
        elif prefix.startswith("self"):
            base = list(me)
        else:
            ups = prefix.count("super")
            base = list(me)[: len(me) - ups] if len(me) >= ups else []
        return base + rest

    found = [m.group(1).split("::")[1:] for m in CRATE_PATH.finditer(code)]
    for m in SUPER_PATH.finditer(code):
        found.append(resolve(m.group(1).rstrip(":"), m.group(2).split("::")))
    for m in USE_GROUP.finditer(code):
        for part in re.split(r",(?![^{]*\})", m.group(2)):
            head = re.match(r"\s*(\w+)(?:::(\w+))?", part)
            if head:
                found.append(resolve(m.group(1), [g for g in head.groups() if g]))
    return found


def file_of(module, files_by_module):
    """The longest module path prefix that is a file."""
    for k in range(len(module), 0, -1):
        if tuple(module[:k]) in files_by_module:
            return files_by_module[tuple(module[:k])]
    return None


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


FN_HEAD = re.compile(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def long_functions(code):
    lines = code.split("\n")
    found = []
    for start, line in enumerate(lines):
        m = FN_HEAD.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(lines)):
            for ch in lines[end]:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
                elif ch == ";" and not opened and depth == 0:
                    break
            else:
                if opened and depth == 0:
                    length = end - start + 1
                    if length > MAX_FN_LINES:
                        found.append((m.group(1), start + 1, length))
                    break
                continue
            break
    return found


def main():
    quiet = "--quiet" in sys.argv
    layer_of = layers()
    problems = []
    files = dict(rust_files())
    files_by_module = {tuple(module_of(rel)): rel for rel in files}
    top_graph, folder_graph = {}, {}
    for rel, path in files.items():
        text = open(path).read()
        code = strip_code(text)
        line_count = text.count("\n")
        if line_count > MAX_FILE_LINES:
            problems.append(f"src/{rel}: {line_count} lines (at most {MAX_FILE_LINES})")
        for name, line, length in long_functions(code):
            problems.append(f"src/{rel}:{line}: fn {name} is {length} lines (at most {MAX_FN_LINES})")
        me = module_of(rel)
        # Test modules assemble the crate to drive it: the layer rule is the code's.
        is_test = (
            os.path.basename(rel) == "tests.rs"
            or rel.endswith("_tests.rs")
            or "tests" in rel.split(os.sep)[:-1]
        )
        if not me or me[0] not in layer_of or is_test:
            continue
        for target in imports(code, me):
            if not target or target[0] not in layer_of:
                continue
            if target[0] != me[0]:
                top_graph.setdefault(me[0], set()).add(target[0])
                mine, theirs = layer_of[me[0]], layer_of[target[0]]
                if theirs[0] < mine[0]:
                    problems.append(
                        f"src/{rel}: imports crate::{'::'.join(target)}: "
                        f"{me[0]} ({mine[1]}) reaches up to {target[0]} ({theirs[1]})"
                    )
                elif theirs[2] and mine[0] != 0:
                    problems.append(
                        f"src/{rel}: imports crate::{'::'.join(target)}: "
                        f"{target[0]} ({theirs[1]}) is imported only by the top"
                    )
                continue
            other = file_of(target, files_by_module)
            # A folder's mod.rs is its face (declares and re-exports the files): the
            # rule is about the files beside each other.
            siblings = os.path.dirname(other or "") == os.path.dirname(rel)
            if other and other != rel and siblings and not other.endswith("mod.rs") and not rel.endswith("mod.rs"):
                folder_graph.setdefault(rel, set()).add(other)
    for comp in cycles(top_graph):
        problems.append("import cycle between top-level modules: " + " -> ".join(comp))
    for comp in cycles(folder_graph):
        problems.append("import cycle inside a folder: " + ", ".join("src/" + c for c in comp))
    for p in sorted(set(problems)):
        print(p)
    if problems:
        print(f"check_shape: {len(set(problems))} finding(s)", file=sys.stderr)
        sys.exit(1)
    if not quiet:
        print("check_shape: layers, cycles and sizes hold")


if __name__ == "__main__":
    main()
