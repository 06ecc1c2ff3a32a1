"""Writing an output file whole or not at all: a temporary file beside it, then a rename.

Every file tracedoc writes (reports, overlays, merged timelines, captured traces and their reports) goes
through ``replace_atomically``:

- the temporary file comes from ``tempfile.mkstemp`` in the destination's directory: a new file with an
  unpredictable name, created with ``O_EXCL`` (a link planted under any name is never followed), and
  then given the mode ``open()`` would have given it;
- it is renamed over the destination only once complete, so a reader never sees half a file and
  concurrent writers leave one whole one;
- it is removed when anything fails, and also when SIGTERM, SIGINT or SIGHUP arrives mid-write: while a
  temporary file exists, handlers of those signals remove it first and then do what the signal did
  before (the previous Python handler, or the default action, which ends the process by that signal).
  A signal the process ignores (SIGHUP under ``nohup``) stays ignored and leaves the write alone.
"""

from __future__ import annotations

import gzip
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable
from typing import BinaryIO

from .errors import TracedocError

TMP_PREFIX = ".tracedoc-tmp-"
CLEANUP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name))


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` sets it, which races other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


FILE_MODE = 0o666 & ~_umask()  # what open() would give a new file; mkstemp's own is 0600

_live: set[str] = set()  # temporary files being written now
_previous: dict[int, object] = {}  # the handlers ours replaced, while any are installed
_lock = threading.Lock()


def _on_signal(signum: int, frame) -> None:
    """Remove every temporary file being written, then act as the handler ours replaced would."""
    for tmp in list(_live):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _live.discard(tmp)
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):  # e.g. Python's SIGINT handler, which raises KeyboardInterrupt
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        _restore()
        os.kill(os.getpid(), signum)  # the default action: the process ends by this signal


def _install() -> bool:
    """Our handlers for ``CLEANUP_SIGNALS`` (from the main thread only: Python allows no other)."""
    if threading.current_thread() is not threading.main_thread() or _previous:
        return False
    for sig in CLEANUP_SIGNALS:
        try:
            # A signal the process ignores (SIGHUP under nohup, SIGINT in a background job) stays ignored:
            # handling it would remove the file being written while the program goes on writing it.
            if signal.getsignal(sig) == signal.SIG_IGN:
                continue
            _previous[sig] = signal.signal(sig, _on_signal)
        except (OSError, ValueError):
            pass
    return True


def _restore() -> None:
    for sig, handler in list(_previous.items()):
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            pass
    _previous.clear()


def replace_atomically(path: str, write: Callable[[BinaryIO], None], suffix: str = "") -> None:
    """Call ``write`` on a new temporary file in ``path``'s directory, then rename it to ``path``.

    The temporary file is removed when anything fails (the exception is raised again), or when one of
    ``CLEANUP_SIGNALS`` arrives before the rename."""
    with _lock:
        installed = _install()
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=suffix, dir=os.path.dirname(os.path.abspath(path)))
        _live.add(tmp)
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        finally:
            _live.discard(tmp)
    finally:
        if installed:
            with _lock:
                _restore()


def gzip_writer(path: str, data: bytes) -> Callable[[BinaryIO], None]:
    """A ``write`` for :func:`replace_atomically`: ``data`` gzip-compressed, the header naming the file as it
    will be (not the temporary one)."""
    name = os.path.basename(path)
    name = name[:-3] if name.lower().endswith(".gz") else name

    def write(f: BinaryIO) -> None:
        with gzip.GzipFile(name, "wb", 6, f) as gz:
            gz.write(data)

    return write


def write_atomic(path: str, data: str | bytes, option: str | None = "--output") -> None:
    """Write ``data`` to ``path`` (gzip-compressed when the path ends in ``.gz``) whole or not at all; a
    clear error naming ``option`` (the command-line option that chose the path) when it cannot be written."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    write = gzip_writer(path, raw) if path.lower().endswith(".gz") else (lambda f: f.write(raw))
    try:
        replace_atomically(path, write)
    except OSError as exc:
        raise TracedocError(
            path,
            "cannot be written",
            exc.strerror or str(exc),
            f"choose another {option} path" if option else "check the directory and free space",
        ) from None


def write_generated(
    directory: "os.PathLike[str] | str", names: Iterable[str], render: Callable[[str], str], check: bool
) -> int:
    """Bring generated files up to date: each of ``names`` in ``directory`` gets ``render(name)``, or with
    ``check`` is only reported when it differs. Says on stderr which were written (or are stale); the exit
    status is 1 when ``check`` found stale files, else 0."""
    import sys
    from pathlib import Path

    stale = []
    for name in names:
        path = Path(directory) / name
        text = render(name)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print(("stale: " if check else "wrote: ") + ", ".join(stale), file=sys.stderr)
    return 1 if check and stale else 0
