"""DeepSpeed console logs, including DeepSpeed-Chat's SFT and RLHF (PPO) training.

DeepSpeed itself prints, per engine, ``step=N, skipped=S, lr=[...]`` every ``steps_per_print`` steps
(``skipped`` is a running total), a timer line with samples/s, and one message per fp16 overflow
(``OVERFLOW! ... Attempted loss scale: X, reducing to Y``, or on a first overflow with hysteresis
``... but hysteresis is 2. Reducing hysteresis to 1``). The loss is printed by the training script.

In DeepSpeed-Chat's PPO step two engines, the actor's and the critic's, print their lines side by
side: each engine's lines are told apart by their step counters (both print ``step=10``, one after the
other) and read as their own series, with their own skip counters and learning rates. The PPO lines
(``act_loss``/``cri_loss``, or ``Actor Loss``/``Critic Loss``) give each series its loss, and the timing
lines (``E2E latency=... Generate time=... Training time=...`` or ``End-to-End => Latency: ...``) the
actor series its step time, samples/s and the generation/training split.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import LogError, excerpt
from .series import LogSeries, normalise_key, parse_number
from .textlog import Events, log_lines, pairs, records_to_series

STEP_RE = re.compile(r"\bstep=(\d{1,18}), skipped=(\d{1,18}), lr=\[([^\]]{0,4000})\]")
# "epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=.., CurrSamplesPerSec=.., ..." and, in
# older releases, "0/40, SamplesPerSec=.." or "0/40, RunningAvgSamplesPerSec=.., CurrSamplesPerSec=.."
TIMER_RE = re.compile(
    r"(?:global_step=(\d{1,18})|\]\s{1,8}\d{1,18}/(\d{1,18})),\s{0,4}(?:RunningAvgSamplesPerSec="
    r"[^,\s]{1,40},\s{0,4}CurrSamplesPerSec=([^,\s]{1,40})|SamplesPerSec=([^,\s]{1,40}))"
    r"(?:,\s{0,4}MemAllocated=([\d.]{1,20})GB,\s{0,4}MaxMemAllocated=([\d.]{1,20})GB)?"
)
RECORD_RE = re.compile(r"step=\d|global_step=\d|act_loss|Actor Loss")
E2E_NEW_RE = re.compile(r"(End-to-End|Generation|Training)\s{0,8}=>\s{0,8}Latency:\s{0,4}([\d.]{1,20})s")
SAMPLES_NEW_RE = re.compile(r"Samples/sec:\s{0,4}([\d.]{1,20})")
_STEP_KEYS = ("step", "global_step", "iteration", "iter")
USER_STEP_RE = re.compile(r"\b(?:step|global_step|iteration|iter)[ \t]{0,4}[=:]?[ \t]{0,4}(\d{1,18})\b", re.I)


class _Engine:
    def __init__(self) -> None:
        self.last_step = -1
        self.prev_skipped = 0
        self.by_step: dict[int, dict[str, Any]] = {}


def read_deepspeed(source: str, text: str) -> LogSeries:
    warnings: list[str] = []
    engines: list[_Engine] = []
    events = Events()
    ppo: list[dict[str, Any]] = []  # one record per PPO line: step, actor and critic loss, timing
    user: dict[int, dict[str, Any]] = {}  # loss lines the training script printed
    last: int | None = None
    epoch_base, prev_epoch, prev_ppo_step = 0, None, -1
    for line in log_lines(text, warnings, RECORD_RE):
        m = STEP_RE.search(line)
        if m:
            step, skipped = int(m.group(1)), int(m.group(2))
            eng = _engine_for(engines, step, skipped, m.group(3))
            rec = eng.by_step.get(step)
            if rec is not None and rec.get("_total") == skipped:
                continue  # a repeated line
            rec = eng.by_step.setdefault(step, {"step": step})
            since = step - eng.last_step if eng.last_step >= 0 else step
            delta = skipped - eng.prev_skipped if skipped >= eng.prev_skipped else skipped
            rec["skipped"] = min(max(0, delta), max(since, 0))  # no more skips than steps since the last line
            rec["_total"], rec["_lr"] = skipped, m.group(3)
            eng.prev_skipped, eng.last_step = skipped, step
            lrs = [parse_number(x) for x in m.group(3).split(",")[:1]]
            rec["lr"] = lrs[0] if lrs else None
            last = step
            continue
        m = TIMER_RE.search(line)
        if m:
            step = int(m.group(1) or m.group(2))
            eng = next((e for e in engines if step in e.by_step), None) or _engine_for(engines, step)
            rec = eng.by_step.setdefault(step, {"step": step})
            eng.last_step = max(eng.last_step, step)
            rec["CurrSamplesPerSec"] = parse_number(m.group(3) or m.group(4))
            if m.group(6):
                rec["max_memory_allocated_gb"] = parse_number(m.group(6))
            last = step
            continue
        if ("act_loss" in line and "cri_loss" in line) or ("Actor Loss" in line and "Critic Loss" in line):
            rec = _bar_fields(line, ":")
            epoch, step = rec.get("epoch"), rec.get("step")
            if step is None or not 0 <= step < 2**53:  # NaN, inf and negatives are not step numbers
                continue
            if prev_epoch is not None and epoch is not None and epoch != prev_epoch and step <= prev_ppo_step:
                epoch_base += prev_ppo_step + 1  # the step counter restarts every epoch
            prev_epoch, prev_ppo_step = epoch, int(step)
            ppo.append(
                {
                    "step": epoch_base + int(step),
                    "actor": rec.get("act_loss", rec.get("actor_loss")),
                    "critic": rec.get("cri_loss", rec.get("critic_loss")),
                }
            )
            continue
        if ppo and ("E2E latency" in line or "=> Latency" in line or "Samples/sec" in line):
            _timing(line, ppo[-1])
            continue
        if events.feed(line, last if not ppo else ppo[-1]["step"]):
            continue
        if "loss" in line.lower():  # the training script prints the loss itself
            rec = pairs(line)
            key = next((k for k in rec if normalise_key(k) in _STEP_KEYS), None)
            value = rec.get(key) if key else None
            if value is None:
                m = USER_STEP_RE.search(line)
                value = float(m.group(1)) if m else None
            if value is not None and value == value and 0 <= value < 2**53:
                row = user.setdefault(int(value), {"step": int(value)})
                for name, x in rec.items():
                    if normalise_key(name) in ("loss", "train_loss", "lm_loss", "grad_norm"):
                        row[normalise_key(name)] = x
    if not engines and not ppo and not user:
        raise LogError(
            source,
            "looks like a DeepSpeed log but has no 'step=N, skipped=..', timer or loss lines",
            excerpt(text),
            "set steps_per_print in the DeepSpeed config so that steps are logged",
        )
    header = {"precision": "fp16"} if any(e["kind"] == "overflow" for e in events.items) else {}
    if ppo:
        return _ppo_series(source, engines, ppo, header, warnings, events.items)
    records = _public(engines[0]) if engines else []
    merged = {r["step"]: dict(r) for r in records}
    for step, row in user.items():
        merged.setdefault(step, {"step": step}).update(row)
    series = records_to_series(source, "DeepSpeed", list(merged.values()), header, warnings, events.items)
    for k, eng in enumerate(engines[1:], 1):
        name = f"engine {k}"
        series.companions[name] = _engine_series(source, eng, header, name)
    if series.companions:
        series.name = "engine 0"
        series.warnings.append(f"{len(engines)} DeepSpeed engines log side by side; each is analysed as its own series")
    return series


MAX_ENGINES = 4  # RLHF runs actor, critic, and at most a reference and a reward model beside them


def _engine_for(engines: list[_Engine], step: int, skipped: int | None = None, lr: str | None = None) -> _Engine:
    """The engine a ``step=N`` line belongs to: the first whose counter is below N; when every engine
    has printed N already, a further engine (RLHF: the critic prints right after the actor), unless the
    line repeats one already read (same counter and learning rate) or MAX_ENGINES are known."""
    for eng in engines:
        if eng.last_step < step:
            return eng
    if engines and all(step < eng.last_step for eng in engines):
        for eng in engines:  # the counters went back: a resumed run of the same engines
            eng.last_step = -1
        return engines[0]
    for eng in engines:
        rec = eng.by_step.get(step)
        if rec is not None and rec.get("_total") == skipped and rec.get("_lr") == lr:
            return eng  # the same line again
    if len(engines) >= MAX_ENGINES:
        return engines[0]
    engines.append(_Engine())
    return engines[-1]


def _bar_fields(line: str, sep: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in line.split("|"):
        name, s, value = part.partition(sep)
        if s and name.strip():
            x = parse_number(value.split()[0] if value.split() else "")
            if x is None and value.strip():
                x = parse_number(value.strip().split()[0].rstrip("s"))
            if x is not None:
                out.setdefault(normalise_key(name), x)
    return out


def _timing(line: str, rec: dict[str, Any]) -> None:
    """E2E / generation / training time and samples/s of the PPO step ``rec``."""
    if "E2E latency" in line:
        fields = _bar_fields(line, "=")
        for key, name in (
            ("e2e_latency", "step_time_s"),
            ("generate_time", "generation_time_s"),
            ("training_time", "training_time_s"),
            ("cursamplespersec", "samples_per_sec"),
        ):
            if key in fields:
                rec[name] = fields[key]
        return
    for kind, value in E2E_NEW_RE.findall(line):
        name = {"End-to-End": "step_time_s", "Generation": "generation_time_s", "Training": "training_time_s"}[kind]
        rec[name] = parse_number(value)
    m = SAMPLES_NEW_RE.search(line)
    if m and "End-to-End" in line:
        rec["samples_per_sec"] = parse_number(m.group(1))


def _public(eng: _Engine) -> list[dict[str, Any]]:
    """An engine's records without the reader's own bookkeeping (keys starting with _)."""
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in eng.by_step.values()]


def _engine_series(source: str, eng: _Engine, header: dict, name: str) -> LogSeries:
    series = records_to_series(source, "DeepSpeed", _public(eng), dict(header))
    series.name = name
    return series


def _ppo_series(
    source: str,
    engines: list[_Engine],
    ppo: list[dict[str, Any]],
    header: dict,
    warnings: list[str],
    events: list[dict[str, Any]],
) -> LogSeries:
    """The actor's series (its loss, the step's timing and throughput, the actor engine's counters) with
    the critic's beside it. Engine counters join the PPO steps when the engines step once per PPO line
    (engine step N is PPO step N - 1); otherwise they keep their own step numbers, said in a warning."""
    steps = [r["step"] for r in ppo]
    aligned = bool(engines) and all(
        abs(max(e.by_step, default=0) - len(ppo)) <= max(10, len(ppo) // 10) for e in engines[:2]
    )
    names = ("actor", "critic")
    out: list[LogSeries] = []
    for k, name in enumerate(names):
        rows = {r["step"]: {"step": r["step"], "loss": r[name]} for r in ppo if r.get(name) is not None}
        if k == 0:
            for r in ppo:
                rows.setdefault(r["step"], {"step": r["step"]}).update(
                    {
                        f: r[f]
                        for f in ("step_time_s", "generation_time_s", "training_time_s", "samples_per_sec")
                        if f in r
                    }
                )
        eng = engines[k] if k < len(engines) else None
        engine_rows = _public(eng) if eng else []
        if eng and aligned:
            for r in engine_rows:
                target = rows.setdefault(r["step"] - 1, {"step": r["step"] - 1})
                target.update({f: v for f, v in r.items() if f in ("skipped", "lr")})
        series = records_to_series(
            source,
            "DeepSpeed-Chat PPO",
            list(rows.values()),
            dict(header),
            list(warnings) if k == 0 else [],
            events if k == 0 else [],
        )
        if eng and not aligned and engine_rows:
            series.companions[f"{name} engine"] = _engine_series(source, eng, header, f"{name} engine")
        series.name = name
        out.append(series)
    actor = out[0]
    actor.companions = {"critic": out[1], **actor.companions, **out[1].companions}
    out[1].companions = {}
    if engines and not aligned:
        actor.warnings.append(
            f"the engines logged {max(engines[0].by_step, default=0)} optimizer steps for "
            f"{len(steps)} PPO steps; their skip counters are analysed on their own step numbers"
        )
    actor.warnings.append(
        "the actor and the critic are read as two series (their losses, skip counters and "
        "learning rates apart); the step time and throughput are the whole PPO step's"
    )
    return actor
