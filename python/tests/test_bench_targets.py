"""bench/targets.py: which cells of a bench_ops.py table miss issue 3's targets (CPU only)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import targets  # noqa: E402

HEADER = [
    "| op | shape | dtype | ignis GB/s | torch GB/s | ignis/torch | ignis % of copy | same-size copy GB/s "
    "| ignis % of same-size copy | diff |",
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
]


def row(op, ratio, copy):
    return f"| {op} | 4096x4096 | bf16 | 1 | 1 | {ratio} | {copy} | 1 | 1% | 0 |"


def test_a_cell_meeting_both_targets_is_not_listed():
    rows = targets.table_rows(HEADER + [row("softmax", "1.200", "85.0%")])
    assert len(rows) == 1
    assert targets.misses(rows) == []


def test_slower_than_torch_and_under_the_copy_target_are_both_named():
    missed = targets.misses(targets.table_rows(HEADER + [row("layer_norm_backward", "0.950", "59.0%")]))
    assert len(missed) == 1
    assert missed[0][1] == ["0.950x torch", "59.0% of copy"]


def test_the_boundaries_meet_the_targets():
    rows = targets.table_rows(HEADER + [row("cast", "1.000", "80.0%")])
    assert len(rows) == 1
    assert targets.misses(rows) == []


def test_just_under_a_boundary_misses_it():
    missed = targets.misses(targets.table_rows(HEADER + [row("silu", "0.997", "79.9%")]))
    assert missed[0][1] == ["0.997x torch (within 1%)", "79.9% of copy"]


def test_sampling_ops_are_held_to_the_torch_ratio_only():
    lines = HEADER + [row("top_p_mask p=0.9", "1.800", "1.0%"), row("sample T=1", "0.900", "2.0%")]
    missed = targets.misses(targets.table_rows(lines))
    assert [(r["op"], reasons) for r, reasons in missed] == [("sample T=1", ["0.900x torch"])]


def test_summary_counts_cells_and_ignores_text_around_the_table():
    lines = ["GPU: x", "", *HEADER, row("softmax", "1.200", "85.0%"), row("rope", "1.100", "75.0%"), "", "Targets ..."]
    text = targets.summary(lines)
    assert text[0].endswith("1 of 2 cells meet them.")
    assert text[1:] == ["- rope 4096x4096 bf16: 75.0% of copy"]
