"""``python -m tracedoc.cli.capture_report PATH``: the child process ``tracedoc run`` starts after a capture.

It analyses the trace (or, with ``--world-size``, the directory the ranks write into, once they
are there) at low priority and writes the reports next to it; see ``tracedoc.capture.report``.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from ..capture.report import report_when_ready

    p = argparse.ArgumentParser(
        prog="python -m tracedoc.cli.capture_report",
        description="Analyse a captured trace and write the reports next to it.",
    )
    p.add_argument("path")
    p.add_argument(
        "--world-size", type=int, default=0, help="PATH is a directory of rank traces: wait for this many files first"
    )
    p.add_argument("--timeout", type=float, default=300.0)
    a = p.parse_args(argv)
    return report_when_ready(a.path, a.world_size, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
