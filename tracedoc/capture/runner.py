"""Run a Python script or module in this process, as ``python`` would, and hand back its exit code."""

from __future__ import annotations

import os
import re
import runpy
import sys

from ..errors import UsageError

_PYTHON_RE = re.compile(r"^python(\d+(\.\d+)?)?$")
_CAPTURE_DIR = os.path.dirname(os.path.abspath(__file__))
_RUNPY_FILE = os.path.abspath(runpy.__file__)
_IGNORED_FLAGS = {"-B", "-E", "-s", "-S", "-q", "-b", "-bb", "-O", "-OO", "-I", "-P"}


class Target:
    def __init__(self, kind: str, name: str, args: list[str], unbuffered: bool = False):
        self.kind = kind  # "script" | "module" | "code"
        self.name = name
        self.args = args
        self.unbuffered = unbuffered

    def __repr__(self) -> str:  # pragma: no cover
        return f"Target({self.kind!r}, {self.name!r}, {self.args!r})"


def parse_command(cmd: list[str]) -> Target:
    """Understand ``python [-u] train.py ARGS``, ``python -m pkg.mod ARGS``, ``python -c CODE`` or ``train.py ARGS``."""
    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError(
            "tracedoc run",
            "needs a command to run",
            None,
            "write it after `--`, e.g. `tracedoc run -- python train.py --epochs 1`",
        )
    first = cmd[0]
    base = os.path.basename(first)
    if base in ("torchrun",) or first == "torch.distributed.run":
        raise UsageError(
            "tracedoc run",
            "wraps one Python process, and torchrun starts several",
            first,
            "put tracedoc inside torchrun instead: `torchrun --nproc_per_node N -m tracedoc.capture "
            "run -- train.py ARGS` (or `torchrun --no-python ... tracedoc run -- python train.py`)",
        )
    unbuffered = False
    if _PYTHON_RE.match(base) or os.path.abspath(first) == os.path.abspath(sys.executable):
        i = 1
        while i < len(cmd):
            a = cmd[i]
            if a == "-m":
                if i + 1 >= len(cmd):
                    raise UsageError("tracedoc run", "`-m` needs a module name")
                mod = cmd[i + 1]
                if mod in ("torch.distributed.run", "torch.distributed.launch"):
                    return parse_command(["torchrun"])
                return Target("module", mod, cmd[i + 2 :], unbuffered)
            if a.startswith("-m") and len(a) > 2:
                return Target("module", a[2:], cmd[i + 1 :], unbuffered)
            if a == "-c":
                if i + 1 >= len(cmd):
                    raise UsageError("tracedoc run", "`-c` needs a program")
                return Target("code", cmd[i + 1], cmd[i + 2 :], unbuffered)
            if a == "-u":
                unbuffered = True
            elif a in _IGNORED_FLAGS:
                pass
            elif a.startswith("-") and a != "-":
                raise UsageError(
                    "tracedoc run",
                    f"does not support the interpreter option {a}",
                    " ".join(cmd),
                    "set it through the environment (e.g. PYTHONWARNINGS, PYTHONUNBUFFERED) or drop it",
                )
            else:
                return Target("script", a, cmd[i + 1 :], unbuffered)
            i += 1
        raise UsageError(
            "tracedoc run", "needs a script, `-m module` or `-c code` after the interpreter", " ".join(cmd)
        )
    if first.endswith(".py") or os.path.isfile(first):
        return Target("script", first, cmd[1:])
    raise UsageError(
        "tracedoc run",
        "runs Python programs in-process, and this is not one",
        first,
        "write `tracedoc run -- python SCRIPT.py ARGS` or `tracedoc run -- python -m MODULE ARGS`",
    )


def _trim_traceback(tb):
    """Drop the leading frames that belong to runpy and tracedoc.capture, as ``python script.py`` would show."""
    while tb is not None:
        raw = tb.tb_frame.f_code.co_filename
        fn = raw if raw.startswith("<") else os.path.abspath(raw)
        if fn in (_RUNPY_FILE, "<frozen runpy>") or fn.startswith(_CAPTURE_DIR + os.sep):
            tb = tb.tb_next
        else:
            break
    return tb


def exit_code_of(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(f"{code}\n")
        sys.stderr.flush()
    except Exception:
        pass
    return 1


def run_target(target: Target) -> int:
    """Run the target with ``sys.argv`` / ``sys.path[0]`` set like the interpreter would.

    Returns the exit code. ``KeyboardInterrupt`` propagates (the caller re-raises it after cleanup so
    the process ends the way Ctrl-C ends a plain ``python`` run); any other exception is printed through
    ``sys.excepthook`` without tracedoc's frames and gives exit code 1.
    """
    if target.unbuffered:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(write_through=True)
            except Exception:
                pass
    old_argv, old_path0 = sys.argv[:], (sys.path[0] if sys.path else None)
    try:
        if target.kind == "script":
            path = target.name
            if not os.path.exists(path):
                sys.stderr.write(
                    f"{sys.executable}: can't open file {os.path.abspath(path)!r}: "
                    f"[Errno 2] No such file or directory\n"
                )
                return 2
            sys.argv = [path] + target.args
            _set_path0(os.path.dirname(os.path.abspath(path)))
            runpy.run_path(path, run_name="__main__")
        elif target.kind == "module":
            sys.argv = ["-m"] + target.args
            _set_path0(os.getcwd())
            runpy.run_module(target.name, run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c"] + target.args
            _set_path0("")
            import types

            mod = types.ModuleType("__main__")
            old_main = sys.modules.get("__main__")
            sys.modules["__main__"] = mod
            try:
                exec(compile(target.name, "<string>", "exec"), mod.__dict__)
            finally:
                if old_main is not None:
                    sys.modules["__main__"] = old_main
        return 0
    except SystemExit as exc:
        return exit_code_of(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        try:
            tb = _trim_traceback(exc.__traceback__)
            exc.with_traceback(tb)
            sys.excepthook(type(exc), exc, tb)
        except Exception:
            import traceback

            traceback.print_exception(type(exc), exc, exc.__traceback__)
        return 1
    finally:
        sys.argv = old_argv
        if old_path0 is not None and sys.path:
            sys.path[0] = old_path0


def _set_path0(p: str) -> None:
    # Like the interpreter: the script's directory comes first. The entry it replaces (tracedoc's own
    # launch directory) moves to the end so that tracedoc keeps importing lazily.
    if sys.path:
        old = sys.path[0]
        sys.path[0] = p
        if old not in sys.path:
            sys.path.append(old)
    else:
        sys.path.insert(0, p)
