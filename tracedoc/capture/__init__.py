"""Capture: profile a training job on demand and analyse the trace at once.

``tracedoc run -- python train.py`` (see :mod:`tracedoc.cli.run`), ``tracedoc.profile(...)`` inside a
script, and ``load_monitor(path)`` for the step monitor's ``steps.jsonl``. torch is imported only when
a session starts, so this package imports without it.
"""

from .monitor import MonitorLog, load_monitor
from .profile import profile, step, trigger
from .report import _write_reports

__all__ = ["profile", "step", "trigger", "load_monitor", "MonitorLog", "_write_reports"]
