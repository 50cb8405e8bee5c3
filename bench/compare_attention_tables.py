#!/usr/bin/env python3
"""Side by side: the tables of bench_attention.py or bench_attention_backward.py under several settings (modules or
environment knobs; scripts/gpu_knobs.sh and gpu_modules.sh write them as NAME-rN tables, one per setting and round).

    python3 bench/compare_attention_tables.py main-r1=a.md draft-r1=b.md main-r2=c.md draft-r2=d.md

Prints one row per shape: each setting's median "ignis" TFLOP/s over its rounds, each setting's median against the
first setting's, and the median of torch's best backend over every table (the peer, timed in each run too). A
change of a percent or two reads only across rounds: runs of the same code moved by up to 1.5% (session 37).
"""
import re
import statistics
import sys


def read_table(lines):
    """{shape: {column: cell}} of one attention benchmark's markdown table (the rows that start with "| B")."""
    header, rows = None, {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| shape |"):
            header = cells
        elif header and line.startswith("| B") and len(cells) == len(header):
            rows[cells[0]] = dict(zip(header, cells))
    return rows


def number(cell):
    """The float of a cell, or None for "-" and other non-numbers."""
    try:
        return float(cell)
    except (TypeError, ValueError):
        return None


def best_peer(row):
    """The fastest torch backend's TFLOP/s of a row, or None."""
    peers = [number(v) for k, v in row.items() if k.startswith("torch")]
    peers = [p for p in peers if p is not None]
    return max(peers) if peers else None


def medians(tables):
    """From [(name, rows)], names SETTING-rN (or SETTING alone, one round): the settings in first-seen order,
    {setting: {shape: median ignis}}, {shape: median best peer over every table}, and the shapes in order."""
    ours, peers, shapes = {}, {}, []
    for name, rows in tables:
        found = re.fullmatch(r"(.+)-r[0-9]+", name)
        setting = found.group(1) if found else name
        per_shape = ours.setdefault(setting, {})
        for shape, row in rows.items():
            if shape not in shapes:
                shapes.append(shape)
            value = number(row.get("ignis"))
            if value is not None:
                per_shape.setdefault(shape, []).append(value)
            peer = best_peer(row)
            if peer is not None:
                peers.setdefault(shape, []).append(peer)
    ours = {s: {shape: statistics.median(v) for shape, v in per.items()} for s, per in ours.items()}
    peers = {shape: statistics.median(v) for shape, v in peers.items()}
    return ours, peers, shapes


def main(argv):
    if not argv or any("=" not in a for a in argv):
        sys.exit("usage: compare_attention_tables.py NAME=TABLE.md ...")
    tables = []
    for arg in argv:
        name, path = arg.split("=", 1)
        with open(path) as f:
            tables.append((name, read_table(f.read().splitlines())))
    ours, peers, shapes = medians(tables)
    settings = list(ours)
    base = settings[0]
    head = ["shape"] + [f"{s} median" for s in settings] + [f"{s} / {base}" for s in settings[1:]] + ["best torch"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for shape in shapes:
        cells = [shape]
        cells += [f"{ours[s][shape]:.1f}" if shape in ours[s] else "-" for s in settings]
        for s in settings[1:]:
            both = shape in ours[s] and shape in ours[base]
            cells.append(f"{ours[s][shape] / ours[base][shape]:.3f}" if both else "-")
        cells.append(f"{peers[shape]:.1f}" if shape in peers else "-")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
