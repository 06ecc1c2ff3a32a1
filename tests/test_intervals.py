"""Interval algebra against a brute-force boolean timeline on random inputs."""

import numpy as np
import pytest

from tracedoc.model import intervals as iv

N = 200  # timeline length for brute force


def to_mask(s, e):
    m = np.zeros(N, dtype=bool)
    for a, b in zip(s, e):
        m[a:b] = True
    return m


def random_set(rng, k):
    s = rng.integers(0, N - 1, size=k)
    e = s + rng.integers(0, 30, size=k)
    return s, np.minimum(e, N)


@pytest.mark.parametrize("seed", range(40))
def test_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    a = iv.union(*random_set(rng, rng.integers(0, 12)))
    b = iv.union(*random_set(rng, rng.integers(0, 12)))
    ma, mb = to_mask(*a), to_mask(*b)
    # normal form: sorted, disjoint, non-touching
    for s, e in (a, b):
        assert np.all(e > s)
        assert np.all(s[1:] > e[:-1])
    assert iv.total(a) == ma.sum()
    assert np.array_equal(to_mask(*iv.intersect(a, b)), ma & mb)
    assert np.array_equal(to_mask(*iv.subtract(a, b)), ma & ~mb)
    lo, hi = sorted(rng.integers(0, N, size=2).tolist())
    window = np.zeros(N, dtype=bool)
    window[lo:hi] = True
    assert np.array_equal(to_mask(*iv.clip(a, lo, hi)), ma & window)
    assert np.array_equal(to_mask(*iv.gaps(iv.clip(a, lo, hi), lo, hi)), window & ~ma)
    q_s, q_e = random_set(rng, 10)
    got = iv.overlap_per_interval(q_s, q_e, a)
    want = [int((ma[s:e]).sum()) for s, e in zip(q_s, q_e)]
    assert got.tolist() == want
    # the intervals of b around [lo, hi) give what all of b gives with anything inside it
    near = iv.overlapping(b, lo, hi)
    inside = iv.clip(a, lo, hi)
    assert set(zip(*map(np.ndarray.tolist, near))) <= set(zip(*map(np.ndarray.tolist, b)))
    assert all(s < hi and e > lo for s, e in zip(*near))
    assert len(near[0]) == sum(1 for s, e in zip(*b) if s < hi and e > lo)
    for op in (iv.intersect, iv.subtract):
        x, y = op(inside, near), op(inside, b)
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])


def test_union_merges_touching_and_drops_empty():
    s, e = iv.union(np.array([5, 0, 10, 3]), np.array([10, 3, 10, 4]))
    assert s.tolist() == [0, 5] and e.tolist() == [4, 10]


def test_gaps_of_empty_set_is_the_window():
    s, e = iv.gaps(iv.empty(), 3, 9)
    assert s.tolist() == [3] and e.tolist() == [9]
