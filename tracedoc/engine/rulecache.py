"""A cache of rule files already read, so that each process need not parse the same TOML again.

Reading the shipped rule files (TOML, then every expression and template compiled and type-checked) is
a fixed cost of every ``tracedoc`` process. The cache holds the parsed contents of the rule files of a
rule set that loaded without a problem, as plain JSON data (tables, arrays, strings, numbers, booleans):
nothing in an entry is code, and nothing read from one runs. On a hit the data go through the same
checks as a rule file's (``rulefile._FileChecker``: every field, expression and template), so an entry
can hold nothing a rule file could not; what the cache saves is the TOML parsing and the file reads.

An entry's key is one SHA-256 of the rule files (each file's path and bytes, in load order), of the code
that gives them a meaning (the modules that check rules, the metric and evidence names they are checked
against, tracedoc's version and Python's). ``<cache dir>/rules-<key>.json`` holds a header (magic, the
key, the payload's own SHA-256) then the payload, a JSON array of ``[path, table]`` pairs.

Where an entry may come from is checked as strictly as what it holds:

- the directory is created with mode 0700; one that is not a directory of this user, or that is writable
  by group or others (where another user could put or replace an entry), is not used: tracedoc says so
  once on stderr and reads the rules from their files;
- an entry is opened without following a symbolic link (``O_NOFOLLOW``, relative to the checked
  directory's descriptor), non-blocking (a FIFO does not hang), and used only when it is a regular file of
  this user that group and others cannot write, no larger than ``MAX_ENTRY_BYTES`` (checked before
  reading); its header must match and its payload hash right and decode to the expected shape.

Anything else (missing, truncated, corrupted, written by another version) is a miss, and the rules are
read and checked from their files as without a cache. Writers write a temporary file in the cache
directory and rename it over the entry, so a reader sees a whole file or none.

The cache directory is ``$TRACEDOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracedoc``, else
``~/.cache/tracedoc``; ``TRACEDOC_CACHE_DIR=off`` (or ``0``, empty) turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_MAGIC = b"tracedoc-rules-cache\x002\n"
_DIGEST = 32  # bytes of a SHA-256 digest
_KEEP = 16  # entries kept in the cache directory (newest first); older ones are removed on a store
_OFF = ("", "0", "off", "no", "false")
_SUFFIX = ".json"
_OLD_SUFFIXES = (".pickle",)  # entries of earlier versions, removed when pruning
MAX_ENTRY_BYTES = 8 << 20  # the shipped rules take ~0.1 MB
# Modules whose code decides what a rule file means.
_CODE = ("rulecache.py", "rulefile.py", "rulemodel.py", "ruletests.py", "expr.py", "template.py", "whatifs.py")
_NOFOLLOW, _CLOEXEC = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_CLOEXEC", 0)
_OPEN = os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
_DIR_OPEN = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC


def cache_dir() -> Path | None:
    """The directory of the cache, or None when it is turned off."""
    explicit = os.environ.get("TRACEDOC_CACHE_DIR")
    if explicit is not None:
        return None if explicit.strip().lower() in _OFF else Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracedoc"


def read_files(paths: Sequence[Path], max_bytes: int) -> list[bytes] | None:
    """The bytes of each file, for ``rules_key``; None (no caching) when one cannot be read, is larger
    than ``max_bytes`` or grows while it is read: the files are then read one by one, which reports the
    problem. Each read asks for the size the file has (a read of ``max_bytes`` would take a buffer of
    that size for every file of a few kB: 2 ms for the shipped rules)."""
    contents = []
    try:
        for path in paths:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size > max_bytes:
                    return None
                raw = f.read(size + 1)
            if len(raw) > size:
                return None
            contents.append(raw)
    except OSError:
        return None
    return contents


def rules_key(paths: Sequence[Path], contents: Sequence[bytes], vocabulary: Any) -> str | None:
    """The cache key of these rule files (path and bytes each) checked against ``vocabulary``; None when
    some part of the code cannot be read (then nothing is cached)."""
    from ..version import __version__

    digest = hashlib.sha256(_MAGIC)
    digest.update(f"{sys.version}\0{__version__}\0{vocabulary!r}\0".encode())
    here = Path(__file__).resolve().parent
    try:
        for name in _CODE:
            digest.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
        digest.update((here.parent / "labels.py").read_bytes() + b"\0")
    except OSError:
        return None
    for path, raw in zip(paths, contents):
        digest.update(str(path).encode("utf-8", "surrogateescape") + b"\0" + len(raw).to_bytes(8, "little") + raw)
    return digest.hexdigest()


def _entry_name(key: str) -> str:
    return f"rules-{key[:40]}{_SUFFIX}"


_loaded: dict[str, list] = {}  # key -> rules, within this process: the same rule objects for every load
_refused: set[str] = set()  # directories already said to be unsafe, so each is said once


def recall(key: str | None) -> list | None:
    """The rules this process already loaded under ``key``."""
    return None if key is None or key not in _loaded else list(_loaded[key])


def remember(key: str | None, rules: list) -> None:
    if key is not None:
        _loaded[key] = list(rules)


def unsafe_reason(st: os.stat_result, uid: int | None = None) -> str | None:
    """Why a directory (or file) with this status may hold what another user wrote, or None."""
    uid = os.getuid() if uid is None else uid
    if st.st_uid != uid:
        return f"it belongs to user id {st.st_uid}, not to you (user id {uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"group or others may write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _open_dir(directory: Path, create: bool) -> int | None:
    """A descriptor of the checked cache directory, or None (not there, unusable, or unsafe: said once)."""
    if create:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except (OSError, ValueError):
            return None
    try:
        fd = os.open(directory, _DIR_OPEN)
    except (OSError, ValueError):
        return None
    st = os.fstat(fd)
    why = None if stat.S_ISDIR(st.st_mode) else "it is not a directory"
    why = why or unsafe_reason(st)
    if why is None:
        return fd
    os.close(fd)
    if str(directory) not in _refused:
        _refused.add(str(directory))
        shown = str(directory).encode("unicode_escape").decode("ascii")
        sys.stderr.write(
            f"tracedoc: rule cache {shown} not used: {why}, so another user could put rules there; "
            "the rules are read from their files (make it yours with mode 700, or set "
            "TRACEDOC_CACHE_DIR=off)\n"
        )
    return None


def load(key: str | None, paths: Sequence[Path]) -> list[dict] | None:
    """The parsed rule files stored under ``key`` (one table each, in the order of ``paths``), or None on
    any miss. The tables are plain data still to be checked as rule files are."""
    directory = cache_dir()
    if key is None or directory is None:
        return None
    dfd = _open_dir(directory, create=False)
    if dfd is None:
        return None
    try:
        data = _read_entry(dfd, _entry_name(key))
    finally:
        os.close(dfd)
    if data is None:
        return None
    head = len(_MAGIC) + 2 * _DIGEST
    if len(data) <= head or not data.startswith(_MAGIC):
        return None
    stored_key, payload_digest = data[len(_MAGIC) : len(_MAGIC) + _DIGEST], data[len(_MAGIC) + _DIGEST : head]
    payload = data[head:]
    if stored_key != bytes.fromhex(key) or hashlib.sha256(payload).digest() != payload_digest:
        return None
    import msgspec

    try:
        pairs = msgspec.json.decode(payload, type=list[tuple[str, dict[str, Any]]])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError):
        return None
    if [p for p, _ in pairs] != [str(p) for p in paths]:
        return None
    return [table for _, table in pairs]


def _read_entry(dfd: int, name: str) -> bytes | None:
    """The bytes of a cache entry that is a regular file of this user, not writable by others and not
    too large; None otherwise. A symbolic link is never followed; a FIFO does not block."""
    try:
        fd = os.open(name, _OPEN, dir_fd=dfd)
    except (OSError, ValueError):
        return None
    with open(fd, "rb") as f:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or unsafe_reason(st) is not None or st.st_size > MAX_ENTRY_BYTES:
                return None
            data = f.read(st.st_size + 1)  # an entry is renamed into place whole: it never grows
        except OSError:
            return None
    return data if len(data) <= min(st.st_size, MAX_ENTRY_BYTES) else None


def store(key: str | None, paths: Sequence[Path], tables: Sequence[dict]) -> None:
    """Store the parsed rule files under ``key``; any failure (read-only or full disk, an unsafe directory,
    data that JSON does not give back unchanged) leaves the cache as it was."""
    directory = cache_dir()
    if key is None or directory is None:
        return
    import msgspec

    pairs = [(str(p), t) for p, t in zip(paths, tables)]
    try:
        payload = msgspec.json.encode(pairs)
        if msgspec.json.decode(payload, type=list[tuple[str, dict[str, Any]]]) != pairs:
            return  # a value JSON does not hold exactly (a date, NaN): such rule sets are not cached
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError, msgspec.DecodeError):
        return
    if len(payload) > MAX_ENTRY_BYTES - 200:
        return
    data = _MAGIC + bytes.fromhex(key) + hashlib.sha256(payload).digest() + payload
    dfd = _open_dir(directory, create=True)
    if dfd is None:
        return
    tmp = f".rules-{os.getpid()}-{os.urandom(8).hex()}.tmp"
    written = False
    try:
        fd = os.open(tmp, _CREATE, 0o600, dir_fd=dfd)
        written = True
        with open(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, _entry_name(key), src_dir_fd=dfd, dst_dir_fd=dfd)
        written = False
        _prune(dfd)
    except OSError:
        pass
    finally:
        if written:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        os.close(dfd)


def _prune(dfd: int) -> None:
    """Keep the newest ``_KEEP`` entries (a checkout whose rules or code change leaves old keys behind);
    entries of earlier versions' formats are removed."""
    entries = []
    for name in os.listdir(dfd):
        if not name.startswith("rules-"):
            continue
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            continue
        if name.endswith(_OLD_SUFFIXES):
            entries.append((-1, name))
        elif name.endswith(_SUFFIX):
            entries.append((st.st_mtime_ns, name))
    old = [n for t, n in entries if t == -1]
    for name in old + [n for _, n in sorted((e for e in entries if e[0] != -1), reverse=True)[_KEEP:]]:
        try:
            os.unlink(name, dir_fd=dfd)
        except OSError:
            pass
