"""One training log (and its config) -> a :class:`LogResult`: metrics, anomalies and config checks.

The findings come from the ``scope = "log"`` rules, evaluated by the same engine as trace findings;
the engine sits above this package, so :func:`tracedoc.api.analyze_log` evaluates them and sets
``verdict`` (any object with ``findings``, ``labels`` and ``to_dict()``).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .analysis import LogAnalysis, LogOptions, analyze_series
from .config import check_config, clip_value, gather
from .reader import read_log, resolve_path
from .registry import LOG_METRICS
from .series import LogSeries
from .source import require_regular_file

SCHEMA_NAME = "tracedoc.log"
SCHEMA_VERSION = 1


@dataclass
class LogResult:
    source: str
    series: LogSeries
    analysis: LogAnalysis
    config_checks: list[dict[str, Any]]
    verdict: Any = None
    sha256: str | None = None
    command: str | None = None
    warnings: list[str] = field(default_factory=list)
    tracedoc_version: str | None = None

    @property
    def step_time_ns(self) -> float | None:
        st = self.metrics.get("step_time_p50_s")
        return st * 1e9 if st else None

    @property
    def metrics(self) -> dict[str, Any]:
        return self.analysis.metrics

    @property
    def anomalies(self) -> list[dict[str, Any]]:
        return self.analysis.anomalies

    @property
    def findings(self) -> list[Any]:
        return list(self.verdict.findings) if self.verdict is not None else []

    @property
    def labels(self) -> list[str]:
        return self.verdict.labels if self.verdict is not None else []

    def to_dict(self) -> dict[str, Any]:
        verdict = self.verdict.to_dict() if self.verdict is not None else {}
        return {
            "schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "tracedoc_version": self.tracedoc_version,
            "input": {"path": self.source, "sha256": self.sha256, "format": self.series.format},
            "command": self.command,
            "fields": dict(self.series.fields_seen),
            "units": dict(self.series.units),
            "metrics": {k: _plain(self.metrics.get(k)) for k in LOG_METRICS},
            "anomalies": [{k: _plain(v) for k, v in a.items()} for a in self.anomalies],
            "config_checks": self.config_checks,
            "lr_schedule": (self.analysis.evidence.get("lr_schedule") or [None])[0],
            "labels": verdict.get("labels", []),
            "findings": verdict.get("findings", []),
            "notes": list(self.analysis.notes),
            "warnings": list(self.warnings),
        }

    def to_json(self) -> str:
        import orjson

        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY,
                            default=_plain).decode()


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def _sha256(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def build_log_result(path: str | os.PathLike, *, config: list[str] | tuple[str, ...] = (),
                     options: LogOptions = LogOptions(), compute_capability: float | None = None,
                     gpu_name: str | None = None, command: str | None = None, fmt: str | None = None,
                     jobs: int = 1, fields: dict[str, str] | None = None) -> LogResult:
    """Read a training log, analyse it and check its config (the log header and ``config`` files)."""
    source = resolve_path(os.fspath(path))
    require_regular_file(source, "log")  # before the hash starts reading: a pipe or a device never ends
    with ThreadPoolExecutor(1) as pool:  # hashlib releases the GIL: the hash runs beside the decode
        digest = pool.submit(_sha256, source)
        try:
            series = read_log(source, fmt, jobs, fields)
        finally:
            sha256 = digest.result()
    analysis = analyze_series(series, options)
    settings, sources = gather(series.header, list(config))
    scales = series.col("loss_scale")
    cfg_metrics, rows = check_config(settings, sources, compute_capability=compute_capability, gpu_name=gpu_name,
                                     logged_loss_scales=scales[np.isfinite(scales) & (scales > 0)].tolist() if scales is not None else None)
    analysis.metrics.update(cfg_metrics)
    if analysis.metrics.get("precision") is None:
        if settings.get("bf16") is True:
            analysis.metrics["precision"] = "bf16"
        elif settings.get("fp16") is True:
            analysis.metrics["precision"] = "fp16"
    analysis.evidence["config_checks"] = rows
    clip, grad = clip_value(settings), series.col("grad_norm")
    analysis.metrics["grad_clip_value"] = clip
    if clip is not None and grad is not None and np.isfinite(grad).any():
        analysis.metrics["grad_clip_fraction"] = float(np.mean(grad[np.isfinite(grad)] > clip))
    for k in LOG_METRICS:
        analysis.metrics.setdefault(k, None)
    return LogResult(source=source, series=series, analysis=analysis, config_checks=rows,
                     sha256=sha256, command=command, warnings=list(series.warnings))
