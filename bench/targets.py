#!/usr/bin/env python3
"""The kernel benchmark's targets, checked on bench_ops.py's markdown table.

Issue 3 asks that no op be slower than torch at 7B-class sizes and that memory-bound ops reach at
least 80% of the copy bandwidth measured in the same run (the 512 MiB clone: "ignis % of copy").
Sampling ops (top-k, top-p, sample) are latency-bound at one to 64 rows: only the torch ratio
applies to them. The values are judged as printed (bench_ops.py: the ratio to 3 decimals, % of copy
to 1), so rounding can lift a cell to a target by at most half a unit of the last printed digit. A cell
slower than torch by less than 1% is marked as within 1%, about the run-to-run spread at the copy roofline.

    python3 bench/targets.py bench-ops.md      # the cells that miss, and a count
"""
import sys

COPY_TARGET = 80.0  # % of the copy bandwidth
LATENCY_BOUND = ("top_k_mask", "top_p_mask", "sample")


def table_rows(lines):
    """The data rows of a bench_ops.py table as dicts keyed by its header."""
    header, rows = None, []
    for line in lines:
        line = line.strip()
        if not line.startswith("|") or line.startswith("| ---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
        else:
            rows.append(dict(zip(header, cells)))
    return rows


def misses(rows):
    """(row, reasons) for every row that misses a target; reasons name the target and the value."""
    out = []
    for row in rows:
        reasons = []
        ratio = float(row["ignis/torch"])
        if ratio < 1.0:
            reasons.append(f"{ratio:.3f}x torch" + (" (within 1%)" if ratio >= 0.99 else ""))
        memory_bound = not row["op"].startswith(LATENCY_BOUND)
        copy = float(row["ignis % of copy"].rstrip("%"))
        if memory_bound and copy < COPY_TARGET:
            reasons.append(f"{copy:.1f}% of copy")
        if reasons:
            out.append((row, reasons))
    return out


def summary(lines):
    """Markdown lines: a count, then one line per cell that misses a target."""
    rows = table_rows(lines)
    missed = misses(rows)
    text = [f"Targets (>= 1.0x torch; memory-bound ops >= {COPY_TARGET:.0f}% of copy): "
            f"{len(rows) - len(missed)} of {len(rows)} cells meet them."]
    for row, reasons in missed:
        text.append(f"- {row['op']} {row['shape']} {row['dtype']}: {', '.join(reasons)}")
    return text


def main(paths):
    if not paths:
        sys.exit("usage: targets.py BENCH_OPS_TABLE.md ...")
    for path in paths:
        with open(path) as f:
            print("\n".join(summary(f.read().splitlines())))


if __name__ == "__main__":
    main(sys.argv[1:])
