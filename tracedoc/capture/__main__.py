"""``python -m tracedoc.capture run|trigger ...`` — the capture commands without the main CLI.

Errors, interruptions and exit codes are the main CLI's (``tracedoc.cli.run_command``).
"""

import sys
import warnings

from ..cli import run, run_command, trigger
from ..cli.common import Parser, show_warning


def main(argv=None) -> int:
    warnings.showwarning = show_warning
    parser = Parser(prog="python -m tracedoc.capture")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in (run, trigger):
        command.register(sub)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
