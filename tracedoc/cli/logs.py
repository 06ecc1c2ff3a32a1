"""``tracedoc logs``: analyse a training log (and its config) and print or write a report."""

from __future__ import annotations

import shlex
import sys
from typing import Any

from ..errors import UsageError
from ..exits import EXIT_OK
from ..logs.registry import LOG_FORMATS
from ..render import FORMATS, renderer
from .analyze import add_engine_options, engine_kwargs, fail_on_exit_code, output_format
from .common import check_output_path, jobs_count, print_warning
from ..outfiles import write_atomic

MIN_WINDOW = 5


def register(sub: Any) -> None:
    g = sub.add_parser("logs", help="analyse a training log (loss, throughput, NaN, spikes, dips) and its config",
                       description="Analyse a training log: JSON Lines, trainer_state.json, Megatron-LM, DeepSpeed, "
                                   "torchtitan, Lightning metrics.csv, CSV, or a tracedoc run directory.")
    g.add_argument("path", help="log file, or a tracedoc run / Hugging Face output directory")
    g.add_argument("--config", metavar="FILE", action="append", default=[],
                   help="Megatron arguments, DeepSpeed or TrainingArguments JSON, YAML config or torchrun env "
                        "(repeatable)")
    g.add_argument("-f", "--format", choices=FORMATS, default=None,
                   help="output format (default: from the -o file's extension, else text)")
    g.add_argument("-o", "--output", help="write the output to this file instead of stdout")
    g.add_argument("--window", type=int, default=50, help="moving-average / trailing-median window in log points")
    g.add_argument("--gpu", metavar="NAME", help="the GPU the job ran on, for the bf16 check (e.g. V100)")
    g.add_argument("-j", "--jobs", type=jobs_count, default=None, help="processes for a large JSON Lines log "
                                                               "(1 to the CPU count; default: CPU count, at most 4)")
    g.add_argument("--format-hint", metavar="NAME", choices=LOG_FORMATS, default=None,
                   help=f"read the log as this format instead of sniffing it: {', '.join(LOG_FORMATS)} "
                        "(text: lines of name: value or name=value pairs)")
    g.add_argument("--field", metavar="NAME=COLUMN", action="append", default=[],
                   help="map a field to the log's own name for it, e.g. --field loss=train/lm_loss --field step=iter "
                        "(repeatable; names: step, loss, eval_loss, lr, grad_norm, tokens_per_s, samples_per_s, "
                        "steps_per_s, step_time_s, step_time_ms, elapsed_s, ...)")
    add_engine_options(g)
    g.set_defaults(func=cmd_logs)


def cmd_logs(args) -> int:
    from ..api import analyze_log
    from ..logs.analysis import LogOptions

    if args.window < MIN_WINDOW:
        raise UsageError("--window", f"must be at least {MIN_WINDOW} log points", repr(args.window), "e.g. --window 50")
    fields = _field_map(args.field)
    fmt = output_format(args.format, args.output, "log")
    engine = engine_kwargs(args)
    command = "tracedoc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else None
    result = analyze_log(args.path, config=args.config, params=engine["params"], rule_dirs=engine["extra_rule_dirs"],
                         gpu_name=args.gpu, command=command, options=LogOptions(window=args.window), jobs=args.jobs,
                         log_format=args.format_hint, fields=fields)
    result.config_files = engine["config_files"]
    for w in result.warnings:
        print_warning(f"{result.source}: {w}")
    text = renderer(fmt, "log").render(result)
    if args.output:
        check_output_path(args.output, [("the log being analysed", args.path), ("the log being analysed", result.source), *(("--config", c) for c in args.config or ()),
                                        *(("--rules", d) for d in args.rules or ())])
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
            raise UsageError("--field", f"{name!r} is not a field tracedoc reads", None, f"one of: {', '.join(MAPPABLE)}")
        out[name] = column.strip()
    return out
