"""Errors reach the user intact, also when raised in a worker process."""

import concurrent.futures as cf
import pickle

import pytest

from tracedoc.engine.params import ParamError
from tracedoc.engine.rulefile import RuleError
from tracedoc.errors import TraceError, TracedocError, UsageError

ERRORS = [
    TraceError("rank3.json", "is empty", "0 bytes", "re-run the profiler"),
    TraceError("rank3.json", "is empty"),
    UsageError("--pid", "expects a process id", "'x'", "e.g. --pid 42"),
    ParamError("--param", "unknown rule 'TD999'"),
    RuleError([("a.toml: when", "syntax error")]),
    RuleError([("a.toml: when", "syntax error"), ("b.toml: id", "duplicate")]),
]


@pytest.mark.parametrize("err", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_pickling(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert back.message() == err.message() and str(back) == str(err)
    assert (back.where, back.what, back.seen, back.todo, back.exit_code) == (
        err.where,
        err.what,
        err.seen,
        err.todo,
        err.exit_code,
    )
    if isinstance(err, RuleError):
        assert back.problems == err.problems


def _raise_trace_error(path: str) -> None:
    raise TraceError(path, "is empty", "0 bytes", "re-run the profiler")


def test_a_workers_error_arrives_as_itself():
    with cf.ProcessPoolExecutor(max_workers=1) as pool:
        fut = pool.submit(_raise_trace_error, "rank7.json")
        with pytest.raises(TraceError) as info:
            fut.result()
    assert info.value.message() == "rank7.json: is empty (saw 0 bytes); re-run the profiler"
    assert isinstance(info.value, TracedocError)
