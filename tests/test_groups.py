"""Numpy group-by and ordering give the rows, sums and tie order of the pandas group-by they replace."""

import numpy as np
import pandas as pd

from tracedoc.model.groups import Groups, distinct, first_match, first_seen, isin, largest_first, lex_order


def test_groups_by_two_keys_match_pandas_with_many_ties():
    rng = np.random.default_rng(0)
    for _ in range(100):
        n, k = int(rng.integers(1, 3000)), int(rng.integers(1, 200))
        a, b, v = rng.integers(-1, k, n), rng.integers(0, 5, n), rng.integers(0, 4, n) * 1000
        want = (
            pd.DataFrame({"a": a, "b": b, "v": v})
            .groupby(["a", "b"])
            .agg(c=("v", "size"), s=("v", "sum"), m=("v", "max"))
            .sort_values("s", ascending=False, kind="stable")
        )
        g = Groups(a, b)
        order = largest_first(g.sum(v))
        assert list(want.index) == list(zip(g.keys[0][order].tolist(), g.keys[1][order].tolist()))
        assert want["c"].tolist() == g.count()[order].tolist()
        assert want["s"].tolist() == g.sum(v)[order].tolist()
        assert want["m"].tolist() == g.max(v)[order].tolist()


def test_groups_by_one_key_first_and_mean_match_pandas():
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(1, 2000))
        a, b, v = rng.integers(0, 50, n), rng.integers(0, 9, n), rng.integers(0, 3, n) * 7
        want = (
            pd.DataFrame({"a": a, "b": b, "v": v})
            .groupby("a")
            .agg(s=("v", "sum"), mean=("v", "mean"), f=("b", "first"))
            .sort_values("s", ascending=False, kind="stable")
        )
        g = Groups(a)
        order = largest_first(g.sum(v))
        assert want.index.tolist() == g.keys[0][order].tolist()
        assert want["f"].tolist() == g.first(b)[order].tolist()
        assert want["mean"].tolist() == (g.sum(v) / g.count())[order].tolist()


def test_small_hand_worked_groups():
    g = Groups(np.array([3, 1, 3, 2, 1]))
    assert g.keys[0].tolist() == [1, 2, 3]
    assert g.count().tolist() == [2, 1, 2]
    assert g.sum(np.array([10, 1, 5, 7, 2])).tolist() == [3, 7, 15]
    assert g.first(np.array([10, 1, 5, 7, 2])).tolist() == [1, 7, 10]
    assert [r.tolist() for r in g.rows()] == [[1, 4], [3], [0, 2]]
    assert largest_first(np.array([3, 7, 15])).tolist() == [2, 1, 0]
    assert largest_first(np.array([5, 7, 5, 7, 6])).tolist() == [1, 3, 4, 0, 2]  # ties in row order


def test_empty_groups():
    g = Groups(np.zeros(0, dtype=np.int64))
    assert g.size == 0 and g.sum(np.zeros(0, dtype=np.int64)).size == 0 and g.max(np.zeros(0)).size == 0
    assert g.rows() == []


def test_rows_of_two_key_groups_are_the_rows_holding_each_key_in_row_order():
    rng = np.random.default_rng(5)
    dev, stream = rng.integers(0, 3, 400), rng.integers(0, 7, 400)
    g = Groups(dev, stream)
    for k, rows in enumerate(g.rows()):
        expected = np.flatnonzero((dev == g.keys[0][k]) & (stream == g.keys[1][k]))
        assert rows.tolist() == expected.tolist()


def test_first_match_takes_the_first_table_row_with_the_same_key():
    keys = (np.array([1, 2, 1, 9]), np.array([5, 5, 6, 5]))
    table = (np.array([2, 1, 1, 1]), np.array([5, 6, 5, 5]))
    # (1,5) first at table row 2, (2,5) at row 0, (1,6) at row 1, (9,5) nowhere.
    assert first_match(keys, table).tolist() == [2, 0, 1, -1]


def test_first_match_agrees_with_a_dictionary_on_random_keys_with_many_ties():

    rng = np.random.default_rng(7)
    for _ in range(200):
        n, m = rng.integers(1, 40, size=2)
        keys = tuple(rng.integers(-2, 3, n) for _ in range(3))
        table = tuple(rng.integers(-2, 3, m) for _ in range(3))
        first: dict[tuple, int] = {}
        for i, row in enumerate(zip(*(c.tolist() for c in table))):
            first.setdefault(row, i)
        want = [first.get(row, -1) for row in zip(*(c.tolist() for c in keys))]
        assert first_match(keys, table).tolist() == want


def test_first_match_with_wide_columns_agrees_with_a_dictionary():
    """Timestamps near 1.7e18 ns, thread ids, label ids far below zero and values at the ends of int64:
    offsets that fit combine directly, the rest are ranked first."""
    rng = np.random.default_rng(8)
    pools = [
        np.array([-(1 << 40) - 3, -(1 << 40) - 9, 7, 140_000_123]),
        1_661_938_466_265_776_000 + rng.integers(0, 2_000_000_000, 30),
        np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max]),
        np.arange(3),
    ]
    for _ in range(300):
        n, m = (int(x) for x in rng.integers(1, 60, size=2))
        cols = [pools[int(i)] for i in rng.integers(0, len(pools), int(rng.integers(1, 4)))]
        keys = tuple(rng.choice(c, n) for c in cols)
        table = tuple(rng.choice(c, m) for c in cols)
        first: dict[tuple, int] = {}
        for i, row in enumerate(zip(*(c.tolist() for c in table))):
            first.setdefault(row, i)
        want = [first.get(row, -1) for row in zip(*(c.tolist() for c in keys))]
        assert first_match(keys, table).tolist() == want


def test_row_codes_order_rows_as_unique_over_rows_does():
    from tracedoc.model.groups import dense_codes, row_codes

    rng = np.random.default_rng(2)
    for _ in range(100):
        n = int(rng.integers(1, 2000))
        wide = rng.integers(0, 2**62, n) % int(rng.integers(1, 9)) * 2**58  # values too far apart for a lookup table
        cols = [rng.integers(-1, int(rng.integers(1, 60)), n), wide, rng.integers(0, 4, n).astype(np.int32)][
            : int(rng.integers(1, 4))
        ]
        want_keys, want_code = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        code, one_each, size = row_codes(*cols)
        assert size == len(want_keys)
        assert code.tolist() == want_code.reshape(-1).tolist()
        assert np.stack(cols, axis=1)[one_each].tolist() == want_keys.tolist()
        for col in cols:
            want_uniq, want_inv = np.unique(col, return_inverse=True)
            uniq, inv = dense_codes(col)
            assert uniq.dtype == col.dtype and uniq.tolist() == want_uniq.tolist()
            assert inv.tolist() == want_inv.tolist()


def test_row_codes_by_hand():
    from tracedoc.model.groups import row_codes

    code, one_each, size = row_codes(np.array([7, 3, 7, 3, 7]), np.array([1, 9, 0, 9, 1]))
    # distinct rows in ascending order: (3, 9), (7, 0), (7, 1)
    assert size == 3 and code.tolist() == [2, 0, 1, 0, 2]
    assert one_each[0] in (1, 3) and one_each[1] == 2 and one_each[2] in (0, 4)  # any row of each group


def test_top_stable_is_the_head_of_a_stable_descending_sort():
    from tracedoc.model.groups import top_stable

    rng = np.random.default_rng(3)
    for _ in range(200):
        n, k = int(rng.integers(0, 300)), int(rng.integers(0, 20))
        values = rng.integers(-5, 6, n) * int(rng.integers(1, 1000))  # many ties
        assert top_stable(values, k).tolist() == np.argsort(-values, kind="stable")[:k].tolist()
    assert top_stable(np.array([3, 9, 3, 9, 1]), 3).tolist() == [1, 3, 0]


def test_first_rows_are_where_each_code_first_appears():
    from tracedoc.model.groups import first_rows

    rng = np.random.default_rng(4)
    for _ in range(100):
        size = int(rng.integers(1, 40))
        codes = np.r_[rng.permutation(size), rng.integers(0, size, int(rng.integers(0, 500)))]
        rng.shuffle(codes)
        assert first_rows(codes, size).tolist() == np.unique(codes, return_index=True)[1].tolist()
    big = np.r_[np.arange(70_000)[::-1], np.arange(70_000)]  # past the 16-bit radix sort
    assert first_rows(big, 70_000).tolist() == list(range(69_999, -1, -1))
    assert first_rows(np.array([2, 0, 2, 1, 0]), 3).tolist() == [1, 3, 0]


def test_distinct_is_np_unique_on_ints_floats_with_nans_and_strings():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(0, 400))
        ints = rng.integers(-5, int(rng.integers(1, 60)), n)
        floats = rng.integers(0, 7, n) / 4.0
        floats[rng.random(n) < 0.2] = np.nan
        names = np.array([f"k{i}" for i in rng.integers(0, 12, n)], dtype=object)
        for column in (ints, ints.astype(np.int32), floats, names.astype(str), names):
            want, got = np.unique(column), distinct(column)
            assert got.dtype == want.dtype
            assert np.array_equal(got, want, equal_nan=column.dtype.kind == "f"), (column, got, want)
    assert distinct(np.array([[2, 1], [1, 2]])).tolist() == [1, 2]  # any shape, flattened as np.unique does
    assert np.isnan(distinct(np.array([np.nan, np.nan]))).tolist() == [True]


def test_isin_is_np_isin_for_few_and_many_members():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n, k = int(rng.integers(0, 400)), int(rng.integers(0, 40))
        span = int(rng.choice([5, 1000, 10**15]))
        values = rng.integers(-span, span, n)
        members = rng.integers(-span, span, k)
        if rng.random() < 0.3:
            members = np.append(members, values[: int(rng.integers(0, n + 1))])
        assert isin(values, members).tolist() == np.isin(values, members).tolist()
        assert isin(values, members.tolist()).tolist() == np.isin(values, members).tolist()
    floats = np.array([0.5, np.nan, 2.0, -1.0, np.inf])
    for members in ([np.nan], [2.0, np.nan, np.inf], list(np.linspace(-1, 3, 17)) + [np.nan]):
        assert isin(floats, members).tolist() == np.isin(floats, members).tolist()
    grid = np.arange(12).reshape(3, 4)
    assert isin(grid, range(3, 20, 2)).tolist() == np.isin(grid, range(3, 20, 2)).tolist()
    assert isin(grid, []).shape == (3, 4) and not isin(grid, []).any()


def test_lex_order_is_np_lexsort_for_every_kind_of_key():
    rng = np.random.default_rng(7)
    n = 5000
    cases = [
        # chain, time, tie-break: few values, wide values, negatives (descending ends), many ties
        (rng.integers(0, 3, n), rng.integers(-(10**12), 10**12, n), rng.integers(0, 40, n)),
        (-rng.integers(0, 10**9, n), rng.integers(0, 5, n)),
        (
            rng.integers(0, 2, n).astype(bool),
            rng.integers(0, 7, n).astype(np.uint8),
            rng.integers(0, 3, n).astype(np.int32),
        ),
        (np.sort(rng.integers(0, 10**10, n)), np.repeat(np.arange(10), n // 10)),  # rows already in order
        (rng.integers(0, 4, n),),
        # ranges whose product passes 2**63 (left to np.lexsort), floats, and a short column
        (rng.integers(-(2**62), 2**62, n), rng.integers(0, 1000, n)),
        (rng.random(n), rng.integers(0, 3, n)),
        (rng.integers(0, 3, 10), rng.integers(0, 3, 10)),
        (rng.integers(2**63, 2**63 + 9, n, dtype=np.uint64), rng.integers(0, 3, n)),  # past int64: np.lexsort
    ]
    for keys in cases:
        got = lex_order(keys)
        assert np.array_equal(got, np.lexsort(keys)), [k.dtype for k in keys]
    assert lex_order((np.zeros(0, dtype=np.int64),)).size == 0


def test_first_seen_is_np_unique_with_first_indices():
    rng = np.random.default_rng(3)
    for size, n in ((5, 1000), (300, 40), (70_000, 5000), (1, 3)):
        codes = rng.integers(0, size, n)
        uniq, first = first_seen(codes, size)
        want = np.unique(codes, return_index=True)
        assert np.array_equal(uniq, want[0]) and np.array_equal(first, want[1]), size
    uniq, first = first_seen(np.zeros(0, dtype=np.int64), 4)
    assert uniq.size == 0 and first.size == 0
