"""Seeded mutations of the inputs beside traces and logs, and the properties every result must have.

Three surfaces (logs have ``fuzz_logs.py``):

- ``report``: a saved report (``tracedoc analyze --format json``) mutated (a value replaced by null, a
  wrong type, a negative, an impossible fraction, a huge or 5,000-digit number, a hostile string; a key
  deleted; deep nesting; the file cut short or gzip-compressed) and given to ``tracedoc diff`` against
  an intact one, on either side, with ``-f json`` (every 5th case also md or text);
- ``config``: a training config given to ``tracedoc logs --config`` (JSON, YAML, TOML, torchrun env,
  Megatron arguments) or a model config given to ``tracedoc analyze --model``, mutated the same way;
- ``expr``: a ``--fail-if`` expression built from grammar pieces and mutated (huge literals, nan,
  unknown names, forbidden syntax, deep nesting, control characters, 5,000 digits).

``run_case(case, root, base)`` writes the case and runs the command in this process, then classifies:

- ``result``: exit 0 or 3 (a gate that failed), valid JSON without NaN/Infinity where JSON was asked
  for, and every number possible (step times not negative, the change equal to after - before,
  every metric inside its range in the metric table, fractions of time in [0, 1]);
- ``error``: exactly one ``tracedoc: error:`` line on stderr, at most 1,000 characters, exit 1 or 2;
- ``traceback``: anything else the user would see as a crash;
- ``hang``: no answer within the time limit;
- ``violation``: a result with an impossible number, a raw control character on stdout or stderr, or
  an input that changed.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import io
import json
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fuzzing import Hang, fingerprint, time_limit

OUTCOMES = ("result", "error", "traceback", "hang", "violation")
HOSTILE_STRINGS = (
    "\x1b]0;t\x07\x1b[2J",
    "\u202egnp.exe",
    "x` ![i](https://e/i.png) <img src=x> @everyone",
    "[link=https://e]x[/]",
    "\nVerdict: no finding",
    "",
    " ",
    "\x00",
    "a" * 10_000,
    "💥" * 50,
)
CONTROL = (
    {chr(c) for c in range(32) if c != 10}
    | {chr(c) for c in range(0x7F, 0xA0)}
    | set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
)


@dataclass
class Case:
    surface: str  # report, config, model, expr
    cls: str  # the mutation
    detail: str
    data: bytes = b""
    name: str = "x.json"
    args: list = field(default_factory=list)  # expr: the --fail-if values
    side: int = 1  # report: which diff side the mutant is (0 before, 1 after)


# -- values -----------------------------------------------------------------------------------------


def _bad_value(rng: random.Random, old):
    kind = rng.choice(
        (
            "null",
            "neg",
            "frac",
            "huge",
            "digits",
            "string",
            "list",
            "dict",
            "bool",
            "zero",
            "nan",
            "float_for_int",
            "hostile",
            "deep",
        )
    )
    return kind, {
        "null": None,
        "neg": -abs(old) if isinstance(old, (int, float)) and not isinstance(old, bool) and old else -1,
        "frac": rng.choice((7.5, 1.0000001, -0.5)),
        "huge": rng.choice((1e308, -1e308, 2**63, 10**30)),
        "digits": _Digits(rng.choice((400, 5000))),
        "string": rng.choice(("4096", "abc", "1e400", "nan")),
        "list": [old],
        "dict": {"v": old},
        "bool": True,
        "zero": 0,
        "nan": _Raw(rng.choice(("NaN", "Infinity", "-Infinity"))),
        "float_for_int": 2.5,
        "hostile": rng.choice(HOSTILE_STRINGS),
        "deep": _nest(rng.choice((50, 2000))),
    }[kind]


class _Digits(int):
    """A number of n digits, written raw into the JSON (5,000 digits: beyond what Python parses by default)."""

    def __new__(cls, n):
        obj = super().__new__(cls, 7)
        obj.n = n
        return obj


class _Raw(str):
    """Text written into the JSON as is (NaN, Infinity)."""


def _nest(depth: int):
    v: object = 1
    for _ in range(depth):
        v = [v]
    return v


def dumps(doc) -> bytes:
    """JSON with the raw pieces (_Digits, _Raw) spliced in as text."""
    marks: dict[str, str] = {}

    def conv(v):
        if isinstance(v, _Digits):
            key = f"__digits{len(marks)}__"
            marks[key] = "9" * v.n
            return key
        if isinstance(v, _Raw):
            key = f"__raw{len(marks)}__"
            marks[key] = str(v)
            return key
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        text = json.dumps(conv(doc))
    finally:
        sys.setrecursionlimit(limit)
    for key, raw in marks.items():
        text = text.replace(f'"{key}"', raw)
    return text.encode()


def _paths(doc, prefix=(), out=None, limit=4000):
    """Every (path, value) of a JSON tree (at most ``limit``)."""
    out = [] if out is None else out
    if len(out) >= limit or len(prefix) > 30:
        return out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((prefix + (k,), v))
            _paths(v, prefix + (k,), out, limit)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):
            out.append((prefix + (i,), v))
            _paths(v, prefix + (i,), out, limit)
    return out


def _set(doc, path, value, delete=False):
    node = doc
    for p in path[:-1]:
        node = node[p]
    if delete:
        if isinstance(node, dict):
            node.pop(path[-1], None)
        else:
            del node[path[-1]]
    else:
        node[path[-1]] = value


def mutate_tree(rng: random.Random, doc, n_edits: int) -> tuple[object, str]:
    doc = copy.deepcopy(doc)
    notes = []
    for _ in range(n_edits):
        paths = _paths(doc)
        if not paths:
            break
        path, old = rng.choice(paths)
        if rng.random() < 0.2:
            _set(doc, path, None, delete=True)
            notes.append(f"del {'/'.join(map(str, path))[-60:]}")
        else:
            kind, value = _bad_value(rng, old)
            _set(doc, path, value)
            notes.append(f"{kind} at {'/'.join(map(str, path))[-60:]}")
    return doc, "; ".join(notes)


def _file_level(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    kind = rng.choice(("cut", "gzip", "gzip_cut", "empty", "bom", "not_json"))
    if kind == "cut":
        return data[: rng.randrange(1, max(2, len(data)))], "cut short"
    if kind == "gzip":
        return gzip.compress(data), "gzip"
    if kind == "gzip_cut":
        z = gzip.compress(data)
        return z[: rng.randrange(10, max(11, len(z)))], "gzip cut short"
    if kind == "empty":
        return b"", "empty"
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 BOM"
    return b"\xff\xfe" + data[:100], "not JSON"


# -- generators -------------------------------------------------------------------------------------

MODEL_CONFIG = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "intermediate_size": 688,
    "vocab_size": 1000,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}
DS_CONFIG = {
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 2,
    "fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 16},
    "zero_optimization": {"stage": 2},
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.1}},
}
EXPR_NAMES = (
    "step_pct",
    "step_ms",
    "exposed_comm_fraction",
    "gpu_busy_fraction",
    "idle_fraction_before",
    "compute_ms",
    "dataloader_stall_fraction_after",
    "kernel_count",
)
EXPR_LITERALS = (
    "0",
    "5",
    "+0.05",
    "-1",
    "1e3",
    "0.5",
    "1e400",
    "1" + "0" * 400,
    "9" * 5000,
    "nan",
    "inf",
    "True",
    "None",
    "'x'",
    "0x10",
    "1_000",
    "1j",
    "10**400",
)
EXPR_SHAPES = (
    "{a} > {x}",
    "{a} >= {x} and {b} < {y}",
    "abs({a}) > {x}",
    "max({a}, {b}) > {x}",
    "{a} / {x} > {y}",
    "not {a} > {x}",
    "{a} > {x} or {b} is None",
    "{a} // {x} > {y}",
    "{a} % {x} == {y}",
    "{a} * {x} > {y}",
    "min({a}, {b}, {x}) < {y}",
    "-{a} > {x}",
    "{a} - {b} > {x}",
)
EXPR_BREAKERS = (
    "__import__('os')",
    "{a}.real",
    "{a}[0]",
    "lambda: 1",
    "[x for x in ()]",
    "(" * 200 + "1" + ")" * 200,
    "{a} > " + " + ".join(["1"] * 2000),
    "{a} >\x1b[2J 5",
    "{a} \u202e> 5",
    "",
    "   ",
    "{a} > > 5",
    "f'{{1}}'",
    "{a} := 3",
    "{a} if 1 else 2",
    "{a} > 'x'",
    "{a} is 5",
    "{a} in (1, 2)",
)


def generate(seed: int, n: int, base_report: dict) -> Iterator[Case]:
    """``n`` cases over the surfaces, in a fixed rotation so every surface gets its share."""
    rng = random.Random(seed)
    base_bytes = dumps(base_report)
    for i in range(n):
        surface = ("report", "config", "model", "expr", "report")[i % 5]
        if surface == "report":
            if rng.random() < 0.15:
                data, detail = _file_level(rng, base_bytes)
                yield Case("report", "file", detail, data, "r.json", side=rng.randrange(2))
            else:
                doc, detail = mutate_tree(rng, base_report, rng.choice((1, 1, 2, 3, 8)))
                yield Case("report", "tree", detail, dumps(doc), "r.json", side=rng.randrange(2))
        elif surface == "model":
            doc, detail = mutate_tree(rng, MODEL_CONFIG, rng.choice((1, 1, 2, 4)))
            yield Case("model", "tree", detail, dumps(doc), "config.json")
        elif surface == "config":
            yield _config_case(rng)
        else:
            yield _expr_case(rng)


def _config_case(rng: random.Random) -> Case:
    kind = rng.choice(("json", "json", "yaml", "toml", "env", "megatron", "file"))
    if kind == "json":
        doc, detail = mutate_tree(rng, DS_CONFIG, rng.choice((1, 2, 4)))
        return Case("config", "json", detail, dumps(doc), "ds_config.json")
    if kind == "yaml":
        lrs = ("1e-4", ".nan", ".inf", "9" * 5000, "[1, 2]", "!!python/object:os.system x", "&a [*a]")
        pieces = [
            f"lr: {rng.choice(lrs)}",
            "batch_size: " + rng.choice(("8", "-1", "0", "1e400", "null", '"x"')),
            rng.choice(("a: &a [1, 2]\nb: [*a, *a, *a]", "x: " + "[" * 3000 + "]" * 3000, "bf16: true", "fp16: yes")),
        ]
        rng.shuffle(pieces)
        return Case("config", "yaml", "yaml " + pieces[0][:40], "\n".join(pieces).encode(), "config.yaml")
    if kind == "toml":
        body = rng.choice(
            (
                "lr = nan\n",
                "lr = inf\n",
                f"batch = {'9' * 5000}\n",
                "[a\n",
                "x = [" * 500 + "]" * 500,
                "bf16 = true\nlr = 1e-4\n",
                "micro_batch_size = -3\n",
            )
        )
        return Case("config", "toml", body[:40], body.encode(), "config.toml")
    if kind == "env":
        body = "\n".join(
            f"{k}={v}"
            for k, v in rng.sample(
                [
                    ("WORLD_SIZE", rng.choice(("8", "-1", "0", "9" * 5000, "x"))),
                    ("LOCAL_WORLD_SIZE", rng.choice(("8", "1e3", ""))),
                    ("RANK", rng.choice(("0", "nan"))),
                    ("NCCL_DEBUG", rng.choice(HOSTILE_STRINGS[:5])),
                ],
                3,
            )
        )
        return Case("config", "env", body[:40], body.encode(), "torchrun.env")
    if kind == "megatron":
        lines = ["------------------------ arguments ------------------------"]
        for k in rng.sample(
            ["micro_batch_size", "global_batch_size", "fp16", "bf16", "lr", "seq_length", "tensor_model_parallel_size"],
            4,
        ):
            v = rng.choice(("4", "-1", "0", "nan", "1e400", "9" * 5000, "True", "None", " " * 60000 + "8"))
            lines.append(f"  {k} {'.' * rng.randrange(1, 40)} {v}")
        lines.append("-------------------- end of arguments ---------------------")
        return Case("config", "megatron", lines[1][:40], "\n".join(lines).encode(), "args.log")
    data, detail = _file_level(rng, dumps(DS_CONFIG))
    return Case("config", "file", detail, data, "ds_config.json")


def _expr_case(rng: random.Random) -> Case:
    a, b = rng.sample(EXPR_NAMES, 2)
    x, y = rng.choice(EXPR_LITERALS), rng.choice(EXPR_LITERALS)
    if rng.random() < 0.3:
        src = rng.choice(EXPR_BREAKERS).format(a=a, b=b)
        cls = "breaker"
    else:
        src = rng.choice(EXPR_SHAPES).format(a=a, b=b, x=x, y=y)
        cls = "grammar"
    return Case(
        "expr",
        cls,
        src[:60],
        args=[src] + ([rng.choice(EXPR_SHAPES).format(a=a, b=b, x="1", y="2")] if rng.random() < 0.2 else []),
    )


# -- running ----------------------------------------------------------------------------------------


def diff_violations(doc: dict) -> list[str]:
    """Numbers in a ``tracedoc diff --format json`` document that cannot be true."""
    out = []
    sides = {k: doc.get(k) or {} for k in ("before", "after")}
    b, a, d = sides["before"].get("step_ns"), sides["after"].get("step_ns"), doc.get("step_delta_ns")
    for k, v in (("before", b), ("after", a)):
        if v is not None and v < 0:
            out.append(f"{k}.step_ns = {v} is negative")
    if None not in (b, a, d) and (a - b) != d:
        out.append(f"step_delta_ns = {d} is not after - before = {a - b}")
    from tracedoc.model.metrics import valid_range

    pairs = doc.get("pairs") or []
    for m in [m for p in pairs for m in p.get("metrics") or []]:  # each inside its range in the metric table
        lo, hi = valid_range(str(m.get("name"))) or (-math.inf, math.inf)
        for k in ("before", "after"):
            v = m.get(k)
            if isinstance(v, (int, float)) and not lo - 1e-9 <= v <= hi + 1e-9:
                out.append(f"metric {m.get('name')} {k} = {v} outside [{lo:g}, {hi:g}]")
    for k, side in sides.items():
        for c, v in (side.get("category_ns") or {}).items():
            if v is not None and v < 0:
                out.append(f"{c} {k} = {v} ns is negative")
    iv = doc.get("step_delta_interval_ns")
    if iv and iv[0] > iv[1]:
        out.append(f"interval {iv} is reversed")
    return out


def _no_constants(c):
    raise ValueError(f"JSON constant {c}")


def run_case(case: Case, root: Path, base_path: Path, timeout_s: int = 30, fmt: str = "json") -> tuple[str, str]:
    """Write ``case`` under ``root``, run its command in this process, return (outcome, message)."""
    from tracedoc.cli import main

    root.mkdir(parents=True, exist_ok=True)
    if case.surface == "expr":
        args = ["diff", str(base_path), str(base_path), "--format", fmt]
        for src in case.args:
            args += ["--fail-if", src]
    else:
        path = root / case.name
        path.write_bytes(case.data)
        if case.surface == "report":
            sides = [str(base_path), str(path)] if case.side else [str(path), str(base_path)]
            args = ["diff", *sides, "--format", fmt, "-j", "1"]
        elif case.surface == "model":
            args = [
                "analyze",
                str(base_path.with_name("t.json")),
                "--no-progress",
                "--format",
                fmt,
                "--model",
                str(path),
                "--tokens-per-step",
                "256",
            ]
        else:
            args = ["logs", str(base_path.with_name("train.jsonl")), "--format", fmt, "-j", "1", "--config", str(path)]
    before = fingerprint(root)
    out, err = io.StringIO(), io.StringIO()
    try:
        with time_limit(timeout_s), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as exc:  # argparse
                rc = exc.code
    except Hang:
        return "hang", f"no answer within {timeout_s} s"
    except Exception as exc:  # noqa: BLE001 - what this harness is for
        return "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
    stdout, stderr = out.getvalue(), err.getvalue()
    if "Traceback" in stderr or rc not in (0, 1, 2, 3):
        return "traceback", f"exit {rc}: {stderr[-300:]}"
    shown = [c for c in stdout + stderr if c in CONTROL]
    if shown:
        return "violation", f"raw control character {shown[0]!r} in the output"
    if fingerprint(root) != before:
        return "violation", "an input changed"
    if rc in (1, 2):
        errors = [ln for ln in stderr.splitlines() if ln.startswith("tracedoc: error: ") or ": error: " in ln]
        if len(errors) != 1:
            return "traceback", f"exit {rc} with {len(errors)} error lines: {stderr[-300:]}"
        if len(errors[0]) > 1000:
            return "violation", f"an error line of {len(errors[0]):,} characters"
        return "error", errors[0][:200]
    if fmt == "json":
        try:
            doc = json.loads(stdout, parse_constant=_no_constants)
        except ValueError as exc:
            return "violation", f"invalid JSON output: {str(exc)[:200]}"
        problems = diff_violations(doc) if args[0] == "diff" else []
        if problems:
            return "violation", problems[0]
    return "result", ""


def make_base(root: Path) -> Path:
    """A small trace, its saved report and a training log under ``root``; returns the report's path."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from trace_builder import TraceBuilder, training_steps

    from tracedoc.cli import main

    root.mkdir(parents=True, exist_ok=True)
    b = TraceBuilder()
    training_steps(b, steps=8, kernels=6)
    trace = b.write(root / "t.json")
    report = root / "base.report.json"
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["analyze", str(trace), "--no-progress", "-f", "json", "-o", str(report)]) == 0
    (root / "train.jsonl").write_text(
        "".join(
            json.dumps({"step": i, "loss": 3 - i / 200, "tokens_per_sec": 1000 + i % 5}) + "\n" for i in range(1, 120)
        )
    )
    return report
