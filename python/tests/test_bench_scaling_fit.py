"""bench/scaling_ops.py's least-squares line: fixed cost and marginal rate from timings (CPU only)."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

import scaling_ops  # noqa: E402


def test_points_on_a_line_give_back_its_intercept_and_slope():
    xs = [1e6, 4e6, 16e6]
    intercept, slope = scaling_ops.fit_line(xs, [12.0 + 3e-4 * x for x in xs])
    assert intercept == pytest.approx(12.0)
    assert slope == pytest.approx(3e-4)


def test_noisy_points_give_the_least_squares_line():
    # y = 1 + 2x with residuals +1, -2, +1 (they sum to zero and are orthogonal to x - mean(x)).
    intercept, slope = scaling_ops.fit_line([0.0, 1.0, 2.0], [2.0, 1.0, 6.0])
    assert intercept == pytest.approx(1.0)
    assert slope == pytest.approx(2.0)


def test_one_distinct_x_is_refused():
    with pytest.raises(ValueError, match="distinct"):
        scaling_ops.fit_line([4096.0, 4096.0], [1.0, 2.0])
