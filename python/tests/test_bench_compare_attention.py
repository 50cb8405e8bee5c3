"""bench/compare_attention_tables.py: the attention benchmarks' tables read and compared (CPU only)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import compare_attention_tables as compare  # noqa: E402

HEADER = "| shape | ignis | torch flash | torch cudnn | torch efficient | ratio | max dq diff |"


def table(rows):
    """A bench_attention_backward.py markdown table: rows of (shape, ignis, flash, cudnn), efficient at 20.0."""
    lines = ["#### Attention backward, bf16, NVIDIA H200", "", HEADER, "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {s} | {i} | {f} | {c} | 20.0 | 0.80 | 0.0039 |" for s, i, f, c in rows]
    return compare.read_table(lines)


def test_rows_are_keyed_by_shape_and_column():
    rows = table([("B1 S1024 H9 D64 full", "138.4", "101.4", "162.2")])
    assert list(rows) == ["B1 S1024 H9 D64 full"]
    assert rows["B1 S1024 H9 D64 full"]["ignis"] == "138.4"
    assert compare.best_peer(rows["B1 S1024 H9 D64 full"]) == 162.2


def test_a_backend_that_skipped_the_shape_is_not_a_peer():
    rows = table([("B1 S512 H9 D64 full", "40.4", "40.3", "-")])
    assert compare.best_peer(rows["B1 S512 H9 D64 full"]) == 40.3


def test_medians_group_rounds_by_setting_in_first_seen_order():
    shape, other = "B4 S4096 H32 D64 full", "B4 S4096 H32 D64 causal"
    tables = [
        ("main-r1", table([(shape, "311.7", "270.3", "456.2"), (other, "286.9", "233.3", "389.3")])),
        ("draft-r1", table([(shape, "335.9", "268.1", "460.0")])),
        ("main-r2", table([(shape, "312.5", "269.0", "458.0")])),
        ("draft-r2", table([(shape, "333.0", "270.0", "462.0")])),
        ("main-r3", table([(shape, "310.0", "271.0", "457.0")])),
        ("draft-r3", table([(shape, "336.5", "269.5", "459.0")])),
    ]
    ours, peers, shapes = compare.medians(tables)
    assert list(ours) == ["main", "draft"]
    assert shapes == [shape, other]
    assert ours["main"][shape] == 311.7  # of 311.7, 312.5, 310.0
    assert ours["draft"][shape] == 335.9  # of 335.9, 333.0, 336.5
    assert ours["main"][other] == 286.9 and other not in ours["draft"]
    # The best backend of each of the six tables: 456.2, 460.0, 458.0, 462.0, 457.0, 459.0 -> median 458.5.
    assert peers[shape] == 458.5
