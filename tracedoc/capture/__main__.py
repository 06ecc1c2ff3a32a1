"""``python -m tracedoc.capture run|trigger ...`` — the capture commands without the main CLI."""

import sys

from ..cli import run, trigger
from ..cli.common import Parser


def main(argv=None) -> int:
    parser = Parser(prog="python -m tracedoc.capture")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in (run, trigger):
        command.register(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        sys.stderr.write("tracedoc: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
