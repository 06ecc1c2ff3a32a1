"""``tracedoc logs --follow``: a watchdog for a running job. Prints each anomaly of the growing log when it
becomes certain; ``--fail-on`` ends it with exit status 3 at the first matching one (so that a launcher
can stop the job); Ctrl-C and SIGTERM end it with a summary and exit status 0."""

from __future__ import annotations

import json
import signal
import sys
import time

from ..errors import UsageError
from ..exits import EXIT_FAIL_ON, EXIT_OK
from ..labels import SEVERITIES


def _matches(finding, fail_on: str | None) -> bool:
    if not fail_on:
        return False
    if fail_on in SEVERITIES:
        return SEVERITIES.index(finding.severity) >= SEVERITIES.index(fail_on)
    return fail_on in (finding.kind, finding.label)


def cmd_follow(args, fields: dict[str, str]) -> int:
    from ..logs.follow import Follower, watch_summary
    from ..logs.reader import FORMATS
    from ..logs.series import FIELD_OVERRIDES
    from ..logs.watch import Watch, WatchOptions

    if len(args.path) != 1:
        raise UsageError("--follow", "follows one log", f"{len(args.path)} paths", "name the file the job appends to")
    if args.output or args.format not in (None, "text", "json"):
        raise UsageError(
            "--follow",
            "prints its findings to stdout, as text or JSON lines",
            None,
            "drop -o, or use --format text / --format json",
        )
    if args.poll <= 0 or args.poll > 60 or args.stall_factor <= 1 or args.idle < 0:
        raise UsageError(
            "--follow",
            "needs 0 < --poll <= 60, --stall-factor > 1 and --idle >= 0",
            f"--poll {args.poll} --stall-factor {args.stall_factor} --idle {args.idle}",
            "e.g. --poll 0.25 --stall-factor 3 --idle 600",
        )
    if args.format_hint is not None and args.format_hint not in FORMATS:
        raise UsageError("--format-hint", f"unknown format {args.format_hint!r}", None, ", ".join(FORMATS))
    as_json = args.format == "json"
    path = args.path[0]
    watch = Watch(WatchOptions(window=args.window, stall_factor=args.stall_factor))
    started = time.monotonic()
    failed: list = []

    def emit(finding) -> bool:
        if as_json:
            line = json.dumps(finding.as_dict())
        else:
            at = f"step {finding.step}" if finding.step is not None else "no step yet"
            line = (
                f"[{time.strftime('%H:%M:%S')}] {at}: {finding.kind} ({finding.severity}): {finding.message} "
                f"[{finding.criterion}]"
            )
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        if _matches(finding, args.fail_on):
            failed.append(finding)
            return True
        return False

    def info(text: str) -> None:
        print(f"tracedoc: {path}: {text}", file=sys.stderr, flush=True)

    stop: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.append("SIGTERM"))
    token = FIELD_OVERRIDES.set(fields)
    follower = Follower(path, args.format_hint, watch, emit, info, idle_s=args.idle or None)
    info(f"following (poll every {args.poll:g} s; Ctrl-C or SIGTERM to stop)")
    why = "interrupted"
    try:
        while not stop:
            if follower.poll():
                break
            time.sleep(args.poll)
        if stop:  # the lines written before SIGTERM are part of the run: read them before the summary
            follower.poll()
        why = stop[0] if stop else f"--fail-on {args.fail_on}: {failed[0].kind} at step {failed[0].step}"
    except KeyboardInterrupt:
        why = "Ctrl-C"
    finally:
        FIELD_OVERRIDES.reset(token)
        signal.signal(signal.SIGTERM, previous)
        follower.tail.close()
    summary = watch_summary(watch, follower, why) + f"; watched {time.monotonic() - started:.0f} s"
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "kind": "summary",
                    "stopped": why,
                    "text": summary,
                    "counts": dict(watch.counts),
                    "records": watch.points,
                }
            )
            + "\n"
        )
    else:
        sys.stdout.write(summary + "\n")
    sys.stdout.flush()
    return EXIT_FAIL_ON if failed else EXIT_OK
