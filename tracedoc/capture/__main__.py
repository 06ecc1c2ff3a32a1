"""``python -m tracedoc.capture run|trigger ...`` — the capture commands without the main CLI."""

import argparse
import sys

from .cli import register


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracedoc.capture")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
