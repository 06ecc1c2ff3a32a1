"""``tracedoc logs``: analyse a training log (and its config) and print or write a report."""

from __future__ import annotations

import shlex
import sys
from typing import Any

from ..errors import UsageError
from ..exits import EXIT_OK
from ..logs.registry import LOG_FORMATS
from ..render import FORMATS, renderer
from .common import add_width_option, check_output_path, jobs_count, output_format, output_width, print_warning
from .ruleoptions import add_engine_options, engine_kwargs, fail_on_exit_code
from ..outfiles import write_atomic

MIN_WINDOW = 5


def register(sub: Any) -> None:
    g = sub.add_parser(
        "logs",
        help="analyse a training log (loss, throughput, NaN, spikes, dips) and its config",
        description="Analyse a training log: JSON Lines, trainer_state.json, Megatron-LM, DeepSpeed, "
        "torchtitan, Lightning metrics.csv, CSV, or a tracedoc run directory.",
    )
    g.add_argument(
        "path",
        nargs="+",
        help="log file, or a tracedoc run / LLaMA-Factory / Hugging Face output "
        "directory; several files (or a directory of Lightning version_N logs) "
        "are segments of one run, joined in step order",
    )
    g.add_argument(
        "--config",
        metavar="FILE",
        action="append",
        default=[],
        help="Megatron arguments, DeepSpeed or TrainingArguments JSON, YAML config or torchrun env (repeatable)",
    )
    g.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        default=None,
        help="output format (default: from the -o file's extension, else text)",
    )
    g.add_argument("-o", "--output", help="write the output to this file instead of stdout")
    g.add_argument("--window", type=int, default=50, help="moving-average / trailing-median window in log points")
    g.add_argument("--gpu", metavar="NAME", help="the GPU the job ran on, for the bf16 check (e.g. V100)")
    g.add_argument(
        "-j",
        "--jobs",
        type=jobs_count,
        default=None,
        help="processes for a large JSON Lines log (1 to the CPU count; default: CPU count, at most 4)",
    )
    g.add_argument(
        "--format-hint",
        metavar="NAME",
        choices=LOG_FORMATS,
        default=None,
        help=f"read the log as this format instead of sniffing it: {', '.join(LOG_FORMATS)} "
        "(text: lines of name: value or name=value pairs)",
    )
    g.add_argument(
        "--field",
        metavar="NAME=COLUMN",
        action="append",
        default=[],
        help="map a field to the log's own name for it, e.g. --field loss=train/lm_loss --field step=iter "
        "(repeatable; names: step, loss, eval_loss, lr, grad_norm, tokens_per_s, samples_per_s, "
        "steps_per_s, step_time_s, step_time_ms, elapsed_s, ...)",
    )
    add_width_option(g)
    w = g.add_argument_group("watching a running job (--follow)")
    w.add_argument(
        "--follow",
        action="store_true",
        help="read the lines already in the log, then the lines appended, and print each anomaly when it "
        "becomes certain (NaN, loss spike, divergence, stall, throughput regression, no new line); "
        "survives rotation and truncation; Ctrl-C or SIGTERM end it with a summary",
    )
    w.add_argument(
        "--stall-factor",
        type=float,
        default=3.0,
        metavar="N",
        help="--follow: a step taking more than N x the median step time is a stall (default 3)",
    )
    w.add_argument(
        "--idle",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="--follow: report no_new_line when no line arrives for this long (default 600; 0: never)",
    )
    w.add_argument(
        "--poll",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="--follow: how often to look for new lines (default 0.5)",
    )
    add_engine_options(g)
    g.set_defaults(func=cmd_logs)


def cmd_logs(args) -> int:
    from ..api import analyze_log
    from ..logs.analysis import LogOptions

    if args.window < MIN_WINDOW:
        raise UsageError("--window", f"must be at least {MIN_WINDOW} log points", repr(args.window), "e.g. --window 50")
    fields = _field_map(args.field)
    if args.follow:
        from .follow import cmd_follow

        return cmd_follow(args, fields)
    from ..logs.registry import WATCH_KINDS

    if args.fail_on in WATCH_KINDS:
        raise UsageError(
            "--fail-on",
            f"{args.fail_on!r} is a kind of live finding, reported with --follow",
            None,
            "add --follow, or name a label (unstable_training) or a severity (warning)",
        )
    fmt = output_format(args.format, args.output, "log")
    engine = engine_kwargs(args)
    command = "tracedoc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else None
    paths = args.path[0] if len(args.path) == 1 else list(args.path)
    result = analyze_log(
        paths,
        config=args.config,
        params=engine["params"],
        rule_dirs=engine["extra_rule_dirs"],
        gpu_name=args.gpu,
        command=command,
        options=LogOptions(window=args.window),
        jobs=args.jobs,
        log_format=args.format_hint,
        fields=fields,
    )
    result.config_files = engine["config_files"]
    for w in result.warnings:
        print_warning(f"{result.source}: {w}")
    text = renderer(fmt, "log").render(result, **({"width": output_width(args)} if fmt == "text" else {}))
    if args.output:
        check_output_path(
            args.output,
            [
                *(("the log being analysed", p) for p in args.path),
                ("the log being analysed", result.source),
                *(("the log being analysed", s.path) for s in result.segments),
                *(("--config", c) for c in args.config or ()),
                *(("--rules", d) for d in args.rules or ()),
            ],
        )
        write_atomic(args.output, text)
        print(f"tracedoc: wrote {fmt} report to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return fail_on_exit_code(result.verdict, args.fail_on) if args.fail_on else EXIT_OK


def _field_map(items: list[str]) -> dict[str, str]:
    """``--field NAME=COLUMN`` options as {canonical name: the log's column}."""
    from ..logs.series import MAPPABLE

    out: dict[str, str] = {}
    for item in items:
        name, sep, column = item.partition("=")
        name = name.strip()
        if not sep or not name or not column.strip():
            raise UsageError("--field", "takes NAME=COLUMN", repr(item[:80]), "e.g. --field loss=train/lm_loss")
        if name not in MAPPABLE:
            raise UsageError(
                "--field", f"{name!r} is not a field tracedoc reads", None, f"one of: {', '.join(MAPPABLE)}"
            )
        out[name] = column.strip()
    return out
