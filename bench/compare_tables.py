#!/usr/bin/env python3
"""Side by side: the bench_ops.py tables of several builds (scripts/gpu_compare.sh writes them).

    python3 bench/compare_tables.py main=a.md branch=b.md

Prints one markdown row per case (op, shape, dtype) with each build's "% of copy" and "ignis/torch",
after each table's copy-bandwidth line (the builds run one after another on the same GPU).
"""
import sys

import targets


def read_table(path):
    """The copy line and {(op, shape, dtype): row} of one bench_ops.py markdown file."""
    with open(path) as f:
        lines = f.read().splitlines()
    copy_line = next((l.split(".")[0] for l in lines if l.startswith("Device copy bandwidth")), "")
    return copy_line, {(r["op"], r["shape"], r["dtype"]): r for r in targets.table_rows(lines)}


def main(argv):
    if not argv or any("=" not in a for a in argv):
        sys.exit("usage: compare_tables.py NAME=TABLE.md ...")
    builds = [(a.split("=", 1)[0], read_table(a.split("=", 1)[1])) for a in argv]
    for name, (copy_line, _) in builds:
        print(f"- {name}: {copy_line}")
    print()
    head = ["op", "shape", "dtype"]
    for name, _ in builds:
        head += [f"{name} % of copy", f"{name} ignis/torch"]
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join(["---"] * 3 + ["---:"] * (len(head) - 3)) + " |")
    cases = list(dict.fromkeys(key for _, (_, rows) in builds for key in rows))
    for key in cases:
        cells = list(key)
        for _, (_, rows) in builds:
            row = rows.get(key, {})
            cells += [row.get("ignis % of copy", "-"), row.get("ignis/torch", "-")]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
