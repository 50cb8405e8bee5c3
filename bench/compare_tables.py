#!/usr/bin/env python3
"""Side by side: the bench_ops.py tables of several builds (scripts/gpu_compare.sh writes them).

    python3 bench/compare_tables.py main=a.md branch=b.md

Prints one markdown row per case (op, shape, dtype) with each build's "% of copy" and "ignis/torch",
after each table's copy-bandwidth line (the builds run one after another on the same GPU). When names
end in -r1, -r2, ... (rounds of scripts/gpu_compare.sh or gpu_knobs.sh), a second table gives each
setting's median over its rounds: % of copy to a tenth of a point (ignis GB/s over that table's own
copy bandwidth) and ignis GB/s, since the whole-point column hides the half-point changes an A/B is after.
"""
import re
import statistics
import sys

import targets


def read_table(path):
    """The copy line and {(op, shape, dtype): row} of one bench_ops.py markdown file."""
    with open(path) as f:
        lines = f.read().splitlines()
    copy_line = next((l.split(".")[0] for l in lines if l.startswith("Device copy bandwidth")), "")
    return copy_line, {(r["op"], r["shape"], r["dtype"]): r for r in targets.table_rows(lines)}


def copy_gbps(copy_line):
    """The GB/s of a "Device copy bandwidth (...): 2980 GB/s" line, or None."""
    found = re.search(r":\s*([0-9.]+)\s*GB/s", copy_line)
    return float(found.group(1)) if found else None


def round_medians(builds):
    """{setting: {case: (median % of copy, median ignis GB/s)}} over the builds named SETTING-rN; empty
    when no name carries a round suffix. A round whose table lacks the case or the copy line is skipped."""
    samples = {}
    for name, (copy_line, rows) in builds:
        found = re.fullmatch(r"(.+)-r[0-9]+", name)
        copy = copy_gbps(copy_line)
        if not found or not copy:
            continue
        per_case = samples.setdefault(found.group(1), {})
        for key, row in rows.items():
            try:
                gbps = float(row.get("ignis GB/s", ""))
            except ValueError:
                continue
            per_case.setdefault(key, []).append((100.0 * gbps / copy, gbps))
    return {
        setting: {
            key: (statistics.median(p for p, _ in values), statistics.median(g for _, g in values))
            for key, values in cases.items()
        }
        for setting, cases in samples.items()
    }


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
    medians = round_medians(builds)
    if medians:
        print()
        print("| op | shape | dtype | " + " | ".join(f"{s} median % of copy (GB/s)" for s in medians) + " |")
        print("| " + " | ".join(["---"] * 3 + ["---:"] * len(medians)) + " |")
        for key in cases:
            cells = list(key)
            for per_case in medians.values():
                cells.append(f"{per_case[key][0]:.1f} ({per_case[key][1]:.0f})" if key in per_case else "-")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
