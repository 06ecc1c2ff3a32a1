"""One training log (and its config) -> a :class:`LogResult`: metrics, anomalies and config checks.

The findings come from the ``scope = "log"`` rules, evaluated by the same engine as trace findings;
the engine sits above this package, so ``tracedoc.stages.judge_log`` evaluates them and returns the
judged result (``LogResult.judged``).
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import msgspec
import numpy as np

from .. import display
from ..model.plain import plain_finite
from ..model.record import Record, replace, to_json_bytes
from ..model.verdict import Finding
from .analysis import LogOptions, analyze_series
from .config import check_config, clip_value, gather
from .reader import display_names, read_log, resolve_paths
from .registry import LOG_METRICS
from .source import require_regular_file

SCHEMA_NAME = "tracedoc.log"
SCHEMA_VERSION = 1


class LogInput(Record, kw_only=True):
    """The log read: its path, SHA-256 and the format it was read as."""

    path: str  # as given (a run directory's log file, where a directory was given)
    sha256: str | None  # of the file's bytes
    format: str  # the format it was read as (jsonl, trainer_state, megatron, deepspeed, ...)


class LogResult(Record, dict=True, kw_only=True):
    """What ``tracedoc logs`` reports: the log's metrics (the metric table's log scope), anomalies, config
    checks and the ``scope = "log"`` rules' findings. A saved value: its fields are ``--format json``
    (``tracedoc/schema/log.schema.json`` is generated from it), so a new field is one line here. A fresh
    result also carries, not saved: ``series`` (the columns read), ``analysis`` (chart data, evidence
    tables, notes) and ``verdict`` (the engine's, once judged)."""

    schema: Literal["tracedoc.log"] = SCHEMA_NAME  # names this document type
    schema_version: Literal[1] = SCHEMA_VERSION  # bumped on any incompatible change
    tracedoc_version: str | None = None  # the tracedoc that wrote it
    input: LogInput
    command: str | None = None  # the command line that wrote it; None from the Python API
    # the pyproject.toml files whose [tool.tracedoc] settings (thresholds, rule directories) it used
    config_files: list[str] = []
    fields: dict[str, str] = {}  # canonical field -> the log's own name for it
    units: dict[str, str] = {}  # canonical field -> its unit where the log says (throughput: tokens/s ...)
    metrics: dict[str, Any]
    anomalies: list[dict[str, Any]] = []  # each with its kind and step (or start_step and end_step)
    config_checks: list[dict[str, Any]] = []  # each check of the config: the arithmetic, whether it holds, the fix
    lr_schedule: dict[str, Any] | None = None  # the learning-rate schedule's shape; null without a learning rate
    labels: list[str] = []  # the findings' verdict labels, most impactful first
    findings: list[Finding] = []  # the scope = "log" rules that fired
    segments: list[LogInput] = []  # the files joined into one run (tracedoc logs A B, version_N directories)
    story: list[str] = []  # how the log's pieces make one run: resumes, second writers, joined files
    notes: list[str] = []  # what the analysis could not do on this log
    warnings: list[str] = []  # what was wrong with the log's lines

    @property
    def source(self) -> str:
        return self.input.path

    @property
    def sha256(self) -> str | None:
        return self.input.sha256

    @property
    def step_time_ns(self) -> float | None:
        st = self.metrics.get("step_time_p50_s")
        return st * 1e9 if st else None

    def __repr__(self) -> str:
        m = self.metrics
        name = os.path.basename(self.source) or self.source
        labels = ", ".join(self.labels) or "no finding"
        text = (
            f"<LogResult {name} ({self.input.format}): {m.get('log_points')} logged steps "
            f"{m.get('log_first_step')}-{m.get('log_last_step')}; {labels} ({len(self.findings)} findings, "
            f"{len(self.anomalies)} anomalies)>"
        )
        return text if len(text) <= 300 else text[:299] + "…"

    TABLES = ("anomalies", "config_checks", "findings", "metrics")

    def table(self, name: str | None = None):
        """Without a name, the names of the result's tables; else one of them as a pandas DataFrame: ``anomalies``,
        ``config_checks``, ``findings`` (rule, label, impact, message) or ``metrics`` (name, value)."""
        import pandas as pd

        if name is None:
            return list(self.TABLES)
        if name in ("anomalies", "config_checks"):
            return pd.DataFrame(getattr(self, name))
        if name == "findings":
            return pd.DataFrame(
                [
                    {
                        "rule_id": f.rule_id,
                        "label": f.label,
                        "severity": f.severity,
                        "impact_fraction": f.impact_fraction,
                        "title": f.title,
                        "message": f.message,
                    }
                    for f in self.findings
                ]
            )
        if name == "metrics":
            return pd.DataFrame({"metric": list(self.metrics), "value": list(self.metrics.values())})
        raise KeyError(f"no log table {name!r}; tables: {', '.join(self.TABLES)}")

    def df(self):
        """The columns read from the log (step and every field it logs) as a pandas DataFrame; a fresh result
        only (a saved report keeps the analysis, not the columns)."""
        import pandas as pd

        series = getattr(self, "series", None)
        if series is None:
            raise KeyError(
                "this result was loaded from a saved report and holds no columns; analyse the log "
                "again with tracedoc.analyze_log"
            )
        cols = {"step": series.step}
        for name, values in series.columns.items():
            if series.has(name):
                present = series.present[name]
                cols[name] = np.where(present, values, np.nan) if values.dtype.kind == "f" else values
        return pd.DataFrame(cols)

    def _repr_html_(self) -> str:
        """A compact card for notebooks: labels, logged steps, anomalies by kind and the top findings."""
        return display.show(self, "log", "card")

    def judged(self, verdict: Any, tracedoc_version: str | None) -> "LogResult":
        """This result with the log rules' verdict: its findings and labels, and the verdict itself."""
        out = replace(
            self, labels=list(verdict.labels), findings=list(verdict.findings), tracedoc_version=tracedoc_version
        )
        out.series, out.analysis, out.verdict = self.series, self.analysis, verdict
        return out

    def to_json(self) -> str:
        """The schema-versioned document (every metric, anomaly and finding)."""
        return msgspec.json.format(to_json_bytes(self), indent=2).decode()

    def to_text(self, **options: Any) -> str:
        """The terminal summary as a string (``width=N`` columns, 100 by default)."""
        return display.show(self, "log", "text", **options)

    def to_markdown(self, **options: Any) -> str:
        """The Markdown report (a ticket comment)."""
        return display.show(self, "log", "md", **options)

    def to_html(self, **options: Any) -> str:
        """The self-contained HTML page with charts."""
        return display.show(self, "log", "html", **options)

    def save(self, path: str | os.PathLike, format: str | None = None) -> None:
        """Write the report to ``path`` in the format its extension (or ``format``) names; JSON otherwise."""
        display.save(self, path, "log", format)


def _sha256(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def build_log_result(
    path: str | os.PathLike | list | tuple,
    *,
    config: list[str] | tuple[str, ...] = (),
    options: LogOptions = LogOptions(),
    compute_capability: float | None = None,
    gpu_name: str | None = None,
    command: str | None = None,
    fmt: str | None = None,
    jobs: int = 1,
    fields: dict[str, str] | None = None,
) -> LogResult:
    """Read a training log, analyse it and check its config (the log header and ``config`` files). ``path``
    may be a list of files (or a directory of Lightning ``version_N`` logs): segments of one run, joined in
    step order."""
    paths = list(path) if isinstance(path, (list, tuple)) else [path]
    files = [f for p in paths for f in resolve_paths(os.fspath(p))]
    source = files[0]
    for f in files:
        require_regular_file(f, "log")  # before the hash starts reading: a pipe or a device never ends
    with ThreadPoolExecutor(1) as pool:  # hashlib releases the GIL: the hash runs beside the decode
        digests = [pool.submit(_sha256, f) for f in files]
        try:
            parts = [read_log(f, fmt, jobs, fields) for f in files]
        finally:
            hashes = [d.result() for d in digests]
    sha256 = hashes[0]
    if len(parts) == 1:
        series, segments = parts[0], []
    else:
        from .runs import join

        series = join(parts, display_names(files))
        order = sorted(range(len(parts)), key=lambda i: (int(parts[i].step[0]) if len(parts[i]) else 0, i))
        segments = [LogInput(path=files[i], sha256=hashes[i], format=parts[i].format) for i in order]
    analysis = analyze_series(series, options)
    settings, sources = gather(series.header, list(config))
    scales = series.col("loss_scale")
    cfg_metrics, rows = check_config(
        settings,
        sources,
        compute_capability=compute_capability,
        gpu_name=gpu_name,
        logged_loss_scales=scales[np.isfinite(scales) & (scales > 0)].tolist() if scales is not None else None,
    )
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
    result = LogResult(
        input=LogInput(path=source, sha256=sha256, format=series.format),
        segments=segments,
        command=command,
        fields=dict(series.fields_seen),
        units=dict(series.units),
        metrics={k: plain_finite(analysis.metrics.get(k)) for k in LOG_METRICS},
        anomalies=[{k: plain_finite(v) for k, v in a.items()} for a in analysis.anomalies],
        config_checks=rows,
        lr_schedule=(analysis.evidence.get("lr_schedule") or [None])[0],
        story=list(series.story),
        notes=list(analysis.notes),
        warnings=list(series.warnings),
    )
    result.series, result.analysis, result.verdict = series, analysis, None
    return result
