"""bench/compare_tables.py: the per-setting medians over rounds (CPU only)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import compare_tables  # noqa: E402


def copy_line(gbps):
    return f"Device copy bandwidth (torch clone of 512 MiB, read + write): {gbps} GB/s"


def rows(gbps_by_case):
    return {case: {"ignis GB/s": str(gbps)} for case, gbps in gbps_by_case.items()}


CASE = ("layer_norm_backward", "4096x4096", "bf16")
OTHER = ("rms_norm_backward", "4096x4096", "bf16")


def test_copy_line_gives_its_bandwidth():
    assert compare_tables.copy_gbps(copy_line(2980)) == 2980.0
    assert compare_tables.copy_gbps("Device copy bandwidth: unknown") is None


def test_medians_group_rounds_by_setting_against_each_tables_own_copy():
    builds = [
        ("base-r1", (copy_line(3000), rows({CASE: 2250}))),
        ("knob-r1", (copy_line(3000), rows({CASE: 2310}))),
        ("base-r2", (copy_line(2900), rows({CASE: 2262}))),
        ("knob-r2", (copy_line(2900), rows({CASE: 2320}))),
        ("base-r3", (copy_line(3000), rows({CASE: 2280, OTHER: 2400}))),
        ("knob-r3", (copy_line(3000), rows({CASE: 2301}))),
    ]
    medians = compare_tables.round_medians(builds)
    assert list(medians) == ["base", "knob"]
    # base: 75.0, 78.0, 76.0 % of copy -> 76.0; GB/s 2250, 2262, 2280 -> 2262.
    assert medians["base"][CASE] == (76.0, 2262.0)
    assert abs(medians["knob"][CASE][0] - 77.0) < 1e-9  # 77.0, 80.0, 76.7 -> 77.0
    assert medians["base"][OTHER] == (80.0, 2400.0)
    assert OTHER not in medians["knob"]


def test_names_without_rounds_or_copy_lines_give_no_medians():
    assert compare_tables.round_medians([("main", (copy_line(3000), rows({CASE: 2250})))]) == {}
    assert compare_tables.round_medians([("main-r1", ("", rows({CASE: 2250})))]) == {}
