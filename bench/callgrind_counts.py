"""Instructions and heap allocations in callgrind output files (bench/profile.sh).

Prints "INSTRUCTIONS ALLOCATIONS" summed over the files given, and with callgrind's
cache model on (`--cache-sim=yes`) "I1_MISSES D1_MISSES" after them (first-level
instruction-cache misses; data-cache misses, reads and writes). An allocation is a call
into the allocator (Rust's global allocator shims, mimalloc's entry points, libc's
malloc family) from a function outside it, so an allocator calling itself is not
counted twice.
"""

import re
import sys

ENTRY = re.compile(
    r"^(__rust_alloc|__rust_alloc_zeroed|__rust_realloc|__rdl_alloc|__rdl_realloc|"
    r"mi_malloc|mi_zalloc|mi_calloc|mi_realloc|mi_malloc_aligned|mi_zalloc_aligned|"
    r"mi_realloc_aligned|malloc|calloc|realloc|posix_memalign|memalign|aligned_alloc)"
    r"(\s|\(|'|$)"
)
INSIDE = re.compile(r"^(__rust_|__rdl_|_?mi_|malloc|calloc|realloc|posix_memalign|memalign|aligned_alloc|_int_|tcache|sysmalloc)")


def counts(path):
    names = {}  # callgrind's compressed names: "(12) name" once, "(12)" after

    def name(spec):
        m = re.match(r"\((\d+)\)\s*(.*)", spec)
        if not m:
            return spec
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "")

    total = allocs = 0
    events, misses = [], None
    current = callee = ""
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")) and not total:
                values = dict(zip(events, map(int, line.split()[1:])))
                total = values.get("Ir", 0)
                if "I1mr" in values:
                    misses = (values["I1mr"], values["D1mr"] + values["D1mw"])
            elif line.startswith("fn="):
                current = name(line[3:].strip())
            elif line.startswith("cfn="):
                callee = name(line[4:].strip())
            elif line.startswith("calls=") and callee:
                if ENTRY.match(callee) and not INSIDE.match(current):
                    allocs += int(line[6:].split()[0])
                callee = ""
    return total, allocs, misses


if __name__ == "__main__":
    t = a = i1 = d1 = 0
    cached = True
    for p in sys.argv[1:]:
        pt, pa, pm = counts(p)
        t += pt
        a += pa
        if pm is None:
            cached = False
        else:
            i1 += pm[0]
            d1 += pm[1]
    print(t, a, *((i1, d1) if cached and sys.argv[1:] else ()))
