"""torchtitan console logs: ``[titan] ... step: 10  loss:  7.81  grad_norm:  1.23  memory: 40.12GiB(50.00%)
tps: 9,000  tflops: 250.31  mfu: 25.31%`` (colour codes stripped; forks print ``step: 640/644 = 99.4%``),
with validation (``validate step: 100  loss: ...``), checkpoint saves and periodic GC as events.
Every rank prints the same line when the output is not prefixed; the copies of a step are one record."""

from __future__ import annotations

import re
from typing import Any

from .errors import LogError, excerpt
from .series import LogSeries, parse_number
from .textlog import Events, log_lines, pairs, records_to_series

STEP_RE = re.compile(r"\bstep:\s{0,8}(\d{1,18})(?:/\d{1,18}(?: = [\d.]{1,12}%)?)?\s{1,8}loss:")
RECORD_RE = re.compile(r"\bstep:\s{0,8}\d{1,18}")


def read_torchtitan(source: str, text: str) -> LogSeries:
    records: list[dict[str, Any]] = []
    header: dict[str, Any] = {}
    warnings: list[str] = []
    events = Events()
    last: int | None = None
    for line in log_lines(text, warnings, STEP_RE):
        m = STEP_RE.search(line)
        if m:
            step = int(m.group(1))
            values = pairs(line[m.end() - len("loss:") :])
            if "validate" in line[: m.start()]:
                events.items.append({"kind": "eval", "step": step})
                if "loss" in values:
                    records.append({"step": step, "val_loss": values["loss"]})
                continue
            records.append({"step": step, **values})
            last = step
            continue
        if "Peak FLOPS used for computing MFU" in line:
            header["peak_flops"] = parse_number(line.rsplit(":", 1)[-1])
            continue
        events.feed(line, last)
    if not any("loss" in r for r in records):
        raise LogError(
            source,
            "looks like a torchtitan log but has no 'step: N  loss: ...' lines",
            excerpt(text),
            "pass the log of rank 0",
        )
    return records_to_series(source, "torchtitan", records, header, warnings, events.items)
