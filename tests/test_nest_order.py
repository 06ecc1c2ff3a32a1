"""CPU ops in nesting order (thread, start, end descending), read off one sort of the whole table."""

import numpy as np

from tracedoc.analyses.host.nesting import nest_order
from tracedoc.model.groups import lex_order
from tracedoc.model.trace import Table


def table(rng, n: int) -> Table:
    start = rng.integers(0, 50, n) * 1000
    return Table(
        "cpu_ops",
        {
            "pid": rng.integers(1, 3, n),
            "tid": rng.integers(7, 10, n),
            "start_ns": start,
            "end_ns": start + rng.integers(0, 4, n) * 1000,  # many ties in start and end
        },
    )


def expected(c: Table, rows: np.ndarray) -> np.ndarray:
    return rows[lex_order((-c["end_ns"][rows], c["start_ns"][rows], c["tid"][rows], c["pid"][rows]))]


def test_every_subset_comes_out_as_its_own_sort_would():
    rng = np.random.default_rng(11)
    c = table(rng, 3000)
    for _ in range(20):
        rows = np.flatnonzero(rng.random(len(c)) < rng.random())
        assert np.array_equal(nest_order(c, rows), expected(c, rows))
    everything = np.arange(len(c))
    assert np.array_equal(nest_order(c, everything), expected(c, everything))
    unsorted = rng.permutation(len(c))[:500]  # not ascending: sorted on its own
    assert np.array_equal(nest_order(c, unsorted), expected(c, unsorted))
    assert nest_order(c, np.zeros(0, dtype=np.int64)).size == 0


def test_a_replaced_column_or_another_table_is_sorted_again():
    rng = np.random.default_rng(12)
    c = table(rng, 2000)
    rows = np.flatnonzero(rng.random(len(c)) < 0.5)
    assert np.array_equal(nest_order(c, rows), expected(c, rows))
    c["end_ns"] = c["end_ns"] + rng.integers(0, 3, len(c)) * 1000
    assert np.array_equal(nest_order(c, rows), expected(c, rows))
    other = table(rng, 2000)
    assert np.array_equal(nest_order(other, rows), expected(other, rows))


def test_the_order_is_not_kept_past_its_table():
    import gc

    from tracedoc.analyses.host import nesting

    c = table(np.random.default_rng(13), 1000)
    nest_order(c, np.arange(0, 1000, 2))
    assert nesting._nest_memo
    del c
    gc.collect()
    assert not nesting._nest_memo
