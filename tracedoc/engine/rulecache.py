"""A cache of validated rule sets, so that each process need not parse and check the same rule files again.

Reading and checking the shipped rule files (TOML, then every expression and template compiled and
type-checked) is a fixed cost of every ``tracedoc`` process. Its result depends only on:

- the rule files: each file's path and bytes, in load order;
- the code that gives them a meaning: the source of the modules that check rules and of the classes
  a rule is made of, the metric and evidence names they are checked against, tracedoc's version and
  Python's (a rule holds parsed expression trees, which are pickled).

All of that goes into one SHA-256 key. The rules checked under a key are pickled to
``<cache dir>/rules-<key>.pickle``: a header (magic, the key, the payload's own SHA-256) then the payload.
A file is used only when it is a regular file of this user whose header matches and whose payload
hashes right and unpickles to rules; anything else (missing, truncated, corrupted, written by another
version, unreadable directory) is a miss, and the rules are read and checked from their files as
without a cache. Only rule sets that loaded without a problem are stored, so a bad rule file is
reported from the files every time. Writers write a temporary file in the cache directory and rename
it over the entry, so a reader sees a whole file or none, and concurrent writers of one key write the
same bytes.

The cache directory is ``$TRACEDOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracedoc``, else
``~/.cache/tracedoc``; ``TRACEDOC_CACHE_DIR=off`` (or ``0``, empty) turns the cache off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_MAGIC = b"tracedoc-rules-cache\x001\n"
_DIGEST = 32  # bytes of a SHA-256 digest
_KEEP = 16  # entries kept in the cache directory (newest first); older ones are removed on a store
_OFF = ("", "0", "off", "no", "false")
# Modules whose code decides what a rule file means or what a loaded rule is made of.
_CODE = ("rulefile.py", "expr.py", "template.py", "whatifs.py")


def cache_dir() -> Path | None:
    """The directory of the cache, or None when it is turned off."""
    explicit = os.environ.get("TRACEDOC_CACHE_DIR")
    if explicit is not None:
        return None if explicit.strip().lower() in _OFF else Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracedoc"


def files_key(paths: Sequence[Path], max_bytes: int, vocabulary: Any) -> str | None:
    """The key of these rule files (read here); None (no caching) when one cannot be read or is larger
    than ``max_bytes``: the files are then read one by one, which reports the problem."""
    contents = []
    try:
        for path in paths:
            with open(path, "rb") as f:
                raw = f.read(max_bytes + 1)
            if len(raw) > max_bytes:
                return None
            contents.append(raw)
    except OSError:
        return None
    return rules_key(paths, contents, vocabulary)


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


def _entry(directory: Path, key: str) -> Path:
    return directory / f"rules-{key[:40]}.pickle"


_loaded: dict[str, list] = {}  # key -> rules, within this process: the same rule objects for every load


def load(key: str | None) -> list | None:
    """The rules stored under ``key``, or None on any miss."""
    directory = cache_dir()
    if key is None or directory is None:
        return None
    if key in _loaded:
        return list(_loaded[key])
    path = _entry(directory, key)
    try:  # non-blocking: a FIFO put in the entry's place must not hang the process
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            st = os.fstat(f.fileno())
            if not (stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid()):
                return None
            data = f.read()
    except (OSError, ValueError):
        return None
    head = len(_MAGIC) + 2 * _DIGEST
    if len(data) <= head or not data.startswith(_MAGIC):
        return None
    stored_key, payload_digest = data[len(_MAGIC):len(_MAGIC) + _DIGEST], data[len(_MAGIC) + _DIGEST:head]
    payload = data[head:]
    if stored_key != bytes.fromhex(key) or hashlib.sha256(payload).digest() != payload_digest:
        return None
    try:
        rules = pickle.loads(payload)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is a miss, whatever it raises
        return None
    if not isinstance(rules, list):
        return None
    _loaded[key] = rules
    return list(rules)


def store(key: str | None, rules: list) -> None:
    """Store ``rules`` under ``key``; any failure (read-only or full disk, ...) leaves the cache as it was."""
    directory = cache_dir()
    if key is None or directory is None:
        return
    try:
        payload = pickle.dumps(rules, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a rule that does not pickle is simply not cached
        return
    _loaded[key] = list(rules)
    data = _MAGIC + bytes.fromhex(key) + hashlib.sha256(payload).digest() + payload
    import tempfile  # only when storing: its import (random, shutil) is not free

    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".rules-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, _entry(directory, key))
        tmp = None
        _prune(directory)
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _prune(directory: Path) -> None:
    """Keep the newest ``_KEEP`` entries (a checkout whose rules or code change leaves old keys behind)."""
    entries = []
    for p in directory.glob("rules-*.pickle"):
        try:
            entries.append((p.stat().st_mtime_ns, p))
        except OSError:
            continue
    for _, p in sorted(entries, reverse=True)[_KEEP:]:
        try:
            p.unlink()
        except OSError:
            pass
