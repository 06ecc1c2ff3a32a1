"""``model.stats`` gives numpy's percentile and median bit for bit, without importing ``numpy.ma``."""

import math
import subprocess
import sys

import numpy as np
import pytest

from tracedoc.model.stats import median, percentile

NUMPY_2_4 = tuple(int(x) for x in np.__version__.split(".")[:2]) >= (2, 4)
QS = [0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 100, 33.3, 66.7, 12.5]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def _columns(rng):
    for _ in range(400):
        n = int(rng.integers(1, 60))
        kind = int(rng.integers(0, 6))
        if kind == 0:
            yield rng.integers(0, 5, n)  # many ties
        elif kind == 1:
            yield rng.integers(-(10**12), 10**12, n)  # nanoseconds, large
        elif kind == 2:
            yield rng.normal(1e6, 3e5, n)
        elif kind == 3:
            # numpy 2.4 keeps float32 data in float32 for one q; earlier versions widen it
            yield rng.random(n).astype(np.float32 if NUMPY_2_4 else np.float64)
        elif kind == 4:
            v = rng.normal(0, 1, n)
            v[rng.integers(0, n)] = rng.choice([np.nan, np.inf, -np.inf])
            yield v
        else:
            yield np.full(n, 7, dtype=np.int64)


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # inf - inf, in numpy as here
def test_percentile_and_median_match_numpy_bit_for_bit():
    rng = np.random.default_rng(3)
    checked = 0
    for v in _columns(rng):
        for q in QS:
            assert _same(percentile(v, q), float(np.percentile(v, q))), (v, q)
        got = percentile(v, QS)
        assert all(_same(g, float(w)) for g, w in zip(got, np.percentile(v, QS)))
        q = float(rng.uniform(0, 100))
        assert _same(percentile(v, q), float(np.percentile(v, q)))
        assert _same(median(v), float(np.median(v))), v
        checked += 1
    assert checked == 400


def test_hand_worked_values():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40, 50], 95) == 48.0  # rank 3.8: 40 + 0.8 * 10
    assert percentile([5], 95) == 5.0
    assert percentile([3, 1, 2], [0, 100]) == [1.0, 3.0]
    assert median([4, 1, 3, 2]) == 2.5
    assert median([9, 1, 5]) == 5.0
    assert math.isnan(median([1.0, float("nan"), 2.0]))


def test_input_is_not_reordered():
    v = np.array([5, 3, 9, 1])
    percentile(v, 50)
    median(v)
    assert v.tolist() == [5, 3, 9, 1]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        percentile([], 50)
    assert math.isnan(median(np.zeros(0)))  # as np.median, less its warning
    with pytest.raises(ValueError):
        percentile([1, 2], 101)


def test_no_masked_array_import():
    code = (
        "import sys, numpy as np\n"
        "from tracedoc.model.stats import median, percentile\n"
        "percentile(np.arange(10), [50, 95]); median(np.arange(9.0))\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
