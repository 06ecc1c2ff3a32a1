"""tracedoc: reads GPU profiler traces and says why a training or inference job is slow."""

__version__ = "0.1.0"


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


from .capture import profile  # noqa: E402  (imports torch lazily)

__all__ = ["__version__", "analyze", "load", "load_dir", "profile"]
