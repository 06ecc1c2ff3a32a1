"""tracedoc: reads GPU profiler traces and says why a training or inference job is slow.

The entry points import their stage on first use, so ``import tracedoc`` (and ``tracedoc --version``)
loads nothing heavy. Importing it installs the output façade (``tracedoc.output``): the results are plain
data, and their ``to_text`` / ``to_html`` / ``_repr_html_`` ... reach the renderers through it.
"""

from . import output as _output  # noqa: F401  (installs the results' output methods; imports no renderer)
from .version import __version__


def load(path, **options):
    """Read one trace file into a ``Trace`` (columnar tables with DataFrame accessors)."""
    from .api import load as _load

    return _load(path, **options)


def load_dir(path, **options):
    """Read every rank trace in a directory."""
    from .api import load_dir as _load_dir

    return _load_dir(path, **options)


def analyze(path, **options):
    """Analyse a trace file or a directory of rank traces; returns an ``AnalysisResult``."""
    from .api import analyze as _analyze

    return _analyze(path, **options)


def analyze_log(path, **options):
    """Analyse a training log (and ``config=[...]`` files); returns a ``LogResult`` with anomalies and findings."""
    from .api import analyze_log as _analyze_log

    return _analyze_log(path, **options)


def load_report(path):
    """Read a report saved with ``tracedoc analyze --format json`` back into an ``AnalysisResult``."""
    from .result import load as _load_report

    return _load_report(path)


def __getattr__(name: str) -> object:
    if name == "profile":  # the capture context manager; imports torch only when a session starts
        from .capture import profile

        return profile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", "analyze", "analyze_log", "load", "load_dir", "load_report", "profile"]


def __dir__() -> list[str]:
    """The public API only (what ``from tracedoc import *`` gives), not the submodules loaded so far."""
    return sorted(__all__)
