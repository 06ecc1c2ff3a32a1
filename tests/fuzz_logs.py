"""Seeded mutations of training logs and configs, and the properties every result must have.

``generate(seed, n)`` yields ``LogCase`` values: a mutation class, what was done, the log's bytes (and a
config's, for config cases). ``run_case(case, root)`` writes the case, runs ``tracedoc logs`` on it in
this process (JSON output, with the config), and classifies the outcome:

- ``result``: the JSON is valid JSON without NaN/Infinity, and every number is possible: counts and
  steps are whole and not negative, fractions of time lie in [0, 1], the step time is positive,
  P10 <= P50 <= P90, the first step is not after the last, every anomaly lies between them;
- ``error``: one ``tracedoc: error:`` line and exit 1 or 2;
- ``traceback``: anything else (a crash the user would see);
- ``hang``: no answer within the time limit;
- ``violation``: a result that breaks one of the properties, or an input file that changed.

The tests run a few hundred cases; ``benchmarks/fuzz_logs_campaign.py`` runs thousands and prints a table.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import log_fixtures as F
from fuzzing import Hang, fingerprint, time_limit

OUTCOMES = ("result", "error", "traceback", "hang", "violation")
TIME_FRACTIONS = (
    "throughput_dip_lost_fraction",
    "periodic_stall_lost_fraction",
    "skipped_iteration_fraction",
    "low_gpu_util_fraction",
    "grad_clip_fraction",
    "generation_time_fraction",
)
NON_NEGATIVE = (
    "log_points",
    "loss_nonfinite_count",
    "grad_norm_nonfinite_count",
    "nan_iterations",
    "skipped_iterations",
    "overflow_messages",
    "loss_spike_count",
    "loss_bump_count",
    "grad_norm_spike_count",
    "throughput_dip_count",
    "periodic_stall_count",
    "periodic_stall_period_steps",
    "skip_burst_count",
    "throughput_p10",
    "throughput_p50",
    "throughput_p90",
    "loss_scale_min",
    "lr_jump_count",
    "low_gpu_util_episode_count",
)


def _sources() -> dict[str, tuple[str, bytes]]:
    """Small logs of every format (name -> file name, bytes)."""
    return {
        "modded-nanogpt": ("train.log", F.modded_nanogpt(n=300, val_every=100).encode()),
        "nanogpt": ("train.log", F.nanogpt_karpathy(n=400, eval_every=100).encode()),
        "llmc": ("main.log", F.llmc_main_log(n=300, val_every=100).encode()),
        "ds-sft": ("ds.log", F.ds_chat_sft(n=600, window=50).encode()),
        "ds-ppo": ("ppo.log", F.ds_chat_ppo(n=80).encode()),
        "megatron": ("megatron.log", F.megatron_deepspeed(n_iters=800).encode()),
        "titan": ("titan.log", F.torchtitan(n=200, gc_every=25).encode()),
        "lightning": ("metrics.csv", F.lightning_metrics_csv(epochs=3).encode()),
        "wandb": ("export.csv", F.wandb_chart_csv(n=120).encode()),
        "hf": ("trainer_state.json", F.hf_trainer_state(n=150).encode()),
        "jsonl": (
            "steps.jsonl",
            "".join(
                json.dumps(
                    {
                        "step": i,
                        "loss": 2 + 1 / i,
                        "lr": 1e-4,
                        "grad_norm": 1.0,
                        "tokens_per_sec": 1000.0 + (i % 7),
                        "gpu_util": [90, 95],
                    }
                )
                + "\n"
                for i in range(1, 301)
            ).encode(),
        ),
    }


CONFIGS = {
    "ds.json": json.dumps(
        {
            "train_batch_size": 64,
            "train_micro_batch_size_per_gpu": 2,
            "gradient_accumulation_steps": 4,
            "fp16": {"enabled": True, "loss_scale": 0},
            "zero_optimization": {"stage": 2},
        }
    ).encode(),
    "args.txt": b"--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 24 --seq-length 4096",
    "env.sh": b"WORLD_SIZE=8\nNNODES=1\n",
    "config.yaml": b"parallelism:\n  tensor_parallel_degree: 2\ntraining:\n  seq_len: 4096\n  local_batch_size: 8\n",
    "titan.toml": b"[parallelism]\ntensor_parallel_degree = 2\n[training]\nseq_len = 4096\n",
}
HUGE = "9" * 5000
HOSTILE_VALUES = (
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e400",
    "-1e400",
    HUGE,
    "-" + HUGE,
    "0",
    "-5",
    "0.0",
    "1e-400",
    "",
    "abc",
    "null",
    "[]",
    "{}",
    '"1"',
    "1,2,3",
    "1.2.3",
    "\u202e",
    "\x00",
    "\x1b[2J",
)


@dataclass
class LogCase:
    cls: str
    detail: str
    name: str
    data: bytes
    config: tuple[str, bytes] | None = None

    def write(self, root: Path) -> tuple[Path, Path | None]:
        root.mkdir(parents=True, exist_ok=True)
        log = root / self.name
        log.write_bytes(self.data)
        cfg = None
        if self.config is not None:
            cfg = root / self.config[0]
            cfg.write_bytes(self.config[1])
        return log, cfg


# ---- mutations -------------------------------------------------------------------------------------
def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def m_truncate(rng, data):
    at = rng.randrange(len(data))
    return f"cut at byte {at}", data[:at]


def m_flip(rng, data):
    b = bytearray(data)
    k = rng.choice([1, 10, 200])
    for _ in range(k):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return f"{k} random bytes", bytes(b)


def m_lines(rng, data):
    lines = _lines(data)
    kind = rng.choice(["shuffle", "reverse", "drop-half", "duplicate", "repeat-one"])
    if kind == "shuffle":
        rng.shuffle(lines)
    elif kind == "reverse":
        lines.reverse()
    elif kind == "drop-half":
        lines = [ln for ln in lines if rng.random() < 0.5]
    elif kind == "duplicate":
        lines = lines + lines
    else:
        lines = [lines[rng.randrange(len(lines))]] * rng.choice([3, 500, 5000])
    return kind, b"\n".join(lines)


def m_values(rng, data):
    """Numbers in the log replaced by hostile values (NaN, 1e400, 5,000 digits, text, control characters)."""
    import re

    value = rng.choice(HOSTILE_VALUES).encode()
    share = rng.choice([0.01, 0.2, 1.0])
    out = re.sub(
        rb"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", lambda m: value if rng.random() < share else m.group(0), data
    )
    return f"{share:.0%} of numbers -> {value[:12]!r}", out


def m_long_line(rng, data):
    lines = _lines(data)
    kind = rng.choice(["digits", "slashes", "spaces", "overflow", "pairs", "quotes", "braces", "args"])
    n = rng.choice([24_000, 60_000, 300_000])
    filler = {
        "digits": "1" * n,
        "slashes": "a/" * (n // 2),
        "spaces": " " * n,
        "overflow": "OVERFLOW! " * (n // 10),
        "pairs": "loss: 1 " * (n // 8),
        "quotes": "'" * n,
        "braces": "{'loss': " * (n // 9),
        "args": "  x" + " " * n + "..... 1",
    }[kind]
    prefix = rng.choice(
        [
            "step 5 loss ",
            "iteration 10/ 100 | ",
            "[Rank 0] step=10, skipped=0, lr=[",
            "",
            "  tensor_model_parallel_size ...... ",
            "s:1 trl:",
            "step:3/10 train_loss:",
        ]
    )
    lines.insert(rng.randrange(len(lines) + 1), (prefix + filler).encode())
    return f"{kind} x{n} after {prefix!r}", b"\n".join(lines)


def m_encoding(rng, data):
    kind = rng.choice(["crlf", "cr", "bom", "utf16", "latin1", "nul", "ansi", "bidi", "tabs"])
    if kind == "crlf":
        return kind, data.replace(b"\n", b"\r\n")
    if kind == "cr":
        return kind, data.replace(b"\n", b"\r")
    if kind == "bom":
        return kind, b"\xef\xbb\xbf" + data
    if kind == "utf16":
        return kind, data.decode("utf-8", "replace").encode("utf-16")
    if kind == "latin1":
        return kind, data.replace(b"e", b"\xe9")
    if kind == "nul":
        return kind, data.replace(b"\n", b"\n\x00", 50)
    if kind == "ansi":
        return kind, data.replace(b"loss", b"\x1b[31mloss\x1b[0m")
    if kind == "bidi":
        return kind, data.replace(b"step", "st\u202eep".encode(), 20)
    return kind, data.replace(b" ", b"\t")


def m_steps(rng, data):
    """Step counters that go back, jump, or are not step numbers."""
    import re

    kind = rng.choice(["back", "huge", "negative", "float"])
    repl = {
        "back": lambda m: str(max(0, int(m.group(2)) - 50)).encode() if len(m.group(2)) < 12 else m.group(2),
        "huge": lambda m: b"1e400" if rng.random() < 0.3 else m.group(2),
        "negative": lambda m: b"-" + m.group(2),
        "float": lambda m: m.group(2) + b".5",
    }[kind]
    out = re.sub(rb"(step[\"']?\s*[:=]\s*|iteration\s+|s:)(\d+)", lambda m: m.group(1) + repl(m), data)
    return kind, out


def m_gzip(rng, data):
    kind = rng.choice(["plain", "truncated", "corrupt", "two-members", "bomb"])
    if kind == "bomb":
        return kind, gzip.compress(b"\n" * rng.choice([10_000_000, 80_000_000]), compresslevel=1)
    z = gzip.compress(data)
    if kind == "truncated":
        z = z[: rng.randrange(10, len(z))]
    elif kind == "corrupt":
        b = bytearray(z)
        b[rng.randrange(10, len(b))] ^= 0xFF
        z = bytes(b)
    elif kind == "two-members":
        z = z + gzip.compress(data[: len(data) // 2])
    return kind, z


def m_json(rng, data):
    """JSON-specific: deep nesting, wrong types, huge keys, a first line over 64 KB."""
    kind = rng.choice(["deep", "types", "big-first", "array", "not-object"])
    if kind == "deep":
        depth = rng.choice([1000, 100_000])
        return kind, (b'{"step": 1, "loss": ' + b"[" * depth + b"]" * depth + b"}\n") + data
    if kind == "types":
        return kind, data.replace(b'"loss": ', b'"loss": {"x": [1, "a", null]}, "_": ', 40)
    if kind == "big-first":
        return kind, json.dumps({"step": 0, "loss": 3.0, "note": "x" * 100_000}).encode() + b"\n" + data
    if kind == "array":
        return kind, b"[" + data.replace(b"\n", b",", 30) + b"]"
    return kind, b"[1, 2, 3]\n" + data


LOG_MUTATIONS = {
    "truncate": m_truncate,
    "flip": m_flip,
    "lines": m_lines,
    "values": m_values,
    "long_line": m_long_line,
    "encoding": m_encoding,
    "steps": m_steps,
    "gzip": m_gzip,
    "json": m_json,
}


def config_case(rng) -> tuple[str, str, bytes]:
    """A mutated or hostile config: (detail, file name, bytes)."""
    kind = rng.choice(
        [
            "mutated",
            "alias-bomb",
            "alias-list",
            "self-anchor",
            "deep-yaml",
            "deep-json",
            "huge-number",
            "python-object",
            "long-flags",
            "binary",
        ]
    )
    if kind == "mutated":
        name = rng.choice(list(CONFIGS))
        detail, data = rng.choice([m_truncate, m_flip, m_values])(rng, CONFIGS[name])
        return f"{name}: {detail}", name, data
    if kind == "alias-bomb":
        levels = "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n" for i in range(9)
        )
        return kind, "bomb.yaml", ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + levels).encode()
    if kind == "alias-list":
        return (
            kind,
            "list.yaml",
            (b"a: &a [" + b",".join([b"x"] * 1000) + b"]\n" + b"".join(f"k{i}: *a\n".encode() for i in range(5000))),
        )
    if kind == "self-anchor":
        return kind, "self.yaml", b"a: &a [1, *a]\nb: &b {x: *b}\n"
    if kind == "deep-yaml":
        return kind, "deep.yaml", b"a: " + b"[" * 20_000 + b"]" * 20_000 + b"\n"
    if kind == "deep-json":
        return kind, "deep.json", b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    if kind == "huge-number":
        name = rng.choice(["h.json", "h.yaml", "h.txt", "h.toml"])
        body = {
            "h.json": f'{{"world_size": {HUGE}, "train_batch_size": 1e400}}',
            "h.yaml": f"world_size: {HUGE}\n",
            "h.txt": f"--world-size {HUGE} --tensor-model-parallel-size {HUGE}",
            "h.toml": f"world_size = {HUGE}\n",
        }
        return kind, name, body[name].encode()
    if kind == "python-object":
        return kind, "evil.yaml", b"a: !!python/object/apply:os.system ['echo pwned']\n"
    if kind == "long-flags":
        return kind, "flags.txt", b"--" + b"-" * 60_000 + b" x --tp 2"
    return kind, "bin.cfg", bytes(rng.randrange(256) for _ in range(2000))


def generate(seed: int, n: int) -> Iterator[LogCase]:
    """``n`` cases: every eighth a config case, the rest mutated logs, the classes taken in turn."""
    rng = random.Random(seed)
    sources = _sources()
    names = list(sources)
    classes = list(LOG_MUTATIONS)
    for i in range(n):
        src = names[i % len(names)]
        fname, data = sources[src]
        if i % 8 == 7:
            detail, cname, cdata = config_case(rng)
            yield LogCase("config", detail, "steps.jsonl", sources["jsonl"][1], (cname, cdata))
            continue
        cls = classes[(i // len(names)) % len(classes)] if i % 3 else rng.choice(classes)
        detail, out = LOG_MUTATIONS[cls](rng, data)
        name = fname + ".gz" if cls == "gzip" else fname
        yield LogCase(cls, f"{src}: {detail}", name, out)


# ---- running one case ---------------------------------------------------------------------------------
def violations(doc: dict) -> list[str]:
    """Numbers in a ``tracedoc logs --format json`` document that cannot be true."""
    out: list[str] = []
    m = doc["metrics"]
    for k in TIME_FRACTIONS:
        v = m.get(k)
        if v is not None and not 0 <= v <= 1:
            out.append(f"{k} = {v} outside [0, 1]")
    for k in NON_NEGATIVE:
        v = m.get(k)
        if v is not None and v < 0:
            out.append(f"{k} = {v} is negative")
    st = m.get("step_time_p50_s")
    if st is not None and not st > 0:
        out.append(f"step_time_p50_s = {st} is not positive")
    p = [m.get(k) for k in ("throughput_p10", "throughput_p50", "throughput_p90")]
    if None not in p and not p[0] <= p[1] <= p[2]:
        out.append(f"throughput percentiles out of order: {p}")
    first, last = m.get("log_first_step"), m.get("log_last_step")
    if first is not None and (first < 0 or last < first):
        out.append(f"steps {first}..{last}")
    for a in doc["anomalies"]:
        s0, s1 = a.get("step", a.get("start_step")), a.get("step", a.get("end_step"))
        if first is not None and not (first <= s0 <= s1 <= last):
            out.append(f"anomaly {a['kind']} at {s0}-{s1} outside the log's steps {first}-{last}")
            break
    return out


def run_case(case: LogCase, root: Path, timeout_s: int = 30, formats: tuple[str, ...] = ("json",)) -> tuple[str, str]:
    """Write ``case`` under ``root``, run ``tracedoc logs`` on it in this process, return (outcome, message)."""
    from tracedoc.cli import main

    log, cfg = case.write(root)
    before = fingerprint(root)
    try:
        with time_limit(timeout_s):
            outputs = []
            for fmt in formats:
                out, err = io.StringIO(), io.StringIO()
                args = ["logs", str(log), "--format", fmt, "-j", "1"] + (["--config", str(cfg)] if cfg else [])
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    rc = main(args)
                stderr = err.getvalue()
                if "Traceback" in stderr or rc not in (0, 1, 2, 3):
                    return "traceback", f"exit {rc}: {stderr[-300:]}"
                if rc in (1, 2):
                    errors = [ln for ln in stderr.splitlines() if ln.startswith("tracedoc: error: ")]
                    return (
                        ("error", errors[0][:200]) if len(errors) == 1 else ("traceback", f"exit {rc}: {stderr[-300:]}")
                    )
                outputs.append(out.getvalue())
    except Hang:
        return "hang", f"no answer within {timeout_s} s"
    except Exception as exc:  # noqa: BLE001 - what this harness is for
        return "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
    problems: list[str] = []
    try:
        doc = json.loads(outputs[0], parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"JSON constant {c}")))
    except ValueError as exc:
        problems.append(f"invalid JSON output: {exc}")
    else:
        problems += violations(doc)
    if fingerprint(root) != before:
        problems.append("the input changed")
    return ("violation", problems[0]) if problems else ("result", "")
