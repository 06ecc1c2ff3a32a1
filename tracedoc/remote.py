"""Inputs by URL: trace files and logs in object storage (``s3://``, ``gs://``, ``az://``) or on a web
server (``https://``), read through fsspec.

A URL names one file, or (ending in ``/``, or naming a folder of the store) a prefix of rank files.
Each store reads its own standard credentials from the environment (``AWS_ACCESS_KEY_ID`` and
``AWS_PROFILE``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_CONNECTION_STRING``, ...).

A file is copied, in bounded blocks, into a private temporary folder and read from there by the same
readers and under the same bounds as a local file (regular file, gzip inflation limits, clear errors);
the copy is removed as soon as it has been read. The copy itself is bounded: an object larger than the
machine's memory (no reader could hold its columns) or than the free space of the temporary folder is
refused before a byte is fetched, and a server that sends more than it announced is cut off at the cap.
Errors name the URL, never the temporary copy.

The store's own failures become one line each, saying which and what to do: no credentials, a bucket
that does not exist, access denied, a missing object, a store package that is not installed. fsspec and
the store packages are imported only when a URL is given.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import TraceError, TracedocError, UsageError
from .infile import memory_bytes

_URL_RE = re.compile(r"^([a-z][a-z0-9+.\-]*)://", re.I)
# The package that reads each protocol, and the tracedoc extra that installs it.
STORES = {
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "az": ("adlfs", "azure"),
    "abfs": ("adlfs", "azure"),
    "abfss": ("adlfs", "azure"),
    "http": ("aiohttp", "https"),
    "https": ("aiohttp", "https"),
}
_CREDENTIALS = {
    "s3fs": "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run `aws configure`",
    "gcsfs": "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run "
    "`gcloud auth application-default login`",
    "adlfs": "set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY "
    "(or a service principal's AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET)",
}
_NO_CREDENTIALS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "DefaultCredentialsError",
    "ClientAuthenticationError",
    "CredentialUnavailableError",
)
_BLOCK = 1 << 20
FALLBACK_CAP_BYTES = 64 << 30  # when the platform does not say how much memory it has


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL (``scheme://...``) rather than a local path."""
    return isinstance(path, str) and bool(_URL_RE.match(path))


def protocol(url: str) -> str:
    m = _URL_RE.match(url)
    return m.group(1).lower() if m else ""


def _store_package(url: str) -> str:
    return STORES.get(protocol(url), ("fsspec", None))[0]


def open_store(url: str) -> tuple[Any, str]:
    """The fsspec file system for ``url`` and the path within it; a usage error when the packages that
    read it are not installed or the protocol is unknown."""
    proto = protocol(url)
    package, extra = STORES.get(proto, (None, None))
    install = f"pip install 'tracedoc[{extra}]'" if extra else None
    try:
        import fsspec
    except ImportError:
        raise UsageError(
            url, "is a URL, and reading URLs needs the fsspec package", None, install or "pip install fsspec"
        ) from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as exc:
        raise UsageError(
            url,
            f"needs the {package or proto + ' store'} package to be read",
            str(exc)[:120],
            install or f"install the fsspec implementation for {proto}://",
        ) from None
    except ValueError as exc:
        known = ", ".join(sorted({p + "://" for p in STORES if p in ("s3", "gs", "az", "https")}))
        raise UsageError(
            url,
            f"uses a protocol tracedoc cannot read ({proto}://)",
            str(exc)[:120],
            f"use one of {known}, or a local path",
        ) from None


def store_error(url: str, exc: BaseException, error: type[TracedocError] = TraceError) -> TracedocError:
    """The store's failure ``exc`` on ``url`` as one clear error: which failure, and what to do."""
    if isinstance(exc, TracedocError):
        return exc
    package = _store_package(url)
    name = type(exc).__name__
    text = str(exc).strip() or name
    if name in _NO_CREDENTIALS or "credentials" in text.lower() and "locate" in text.lower():
        return error(
            url,
            "cannot be read: no credentials for the store were found",
            f"{name}: {text}"[:200],
            _CREDENTIALS.get(package, "give the store's credentials in its standard environment variables"),
        )
    lowered = text.lower()
    if isinstance(exc, PermissionError) or "accessdenied" in lowered.replace(" ", "") or "forbidden" in lowered:
        return error(
            url,
            "cannot be read: access denied",
            text[:200],
            "check that the credentials in the environment may list and read it "
            "(for S3: s3:ListBucket on the bucket and s3:GetObject on its objects)",
        )
    if isinstance(exc, FileNotFoundError):
        if (
            "bucket" in lowered
            and ("not exist" in lowered or "nosuchbucket" in lowered)
            or "container" in lowered
            and "not" in lowered
        ):
            return error(
                url,
                "cannot be read: its bucket does not exist",
                text[:200],
                "check the bucket's name (and the region or endpoint the environment names)",
            )
        return error(
            url, "does not exist", text[:200], "check the URL (a trace file, or a prefix of rank traces ending in /)"
        )
    if isinstance(exc, IsADirectoryError):
        return error(url, "is a prefix (a folder), not a file", None, "pass one file's URL")
    return error(
        url,
        "cannot be read from the store",
        f"{name}: {text}"[:200],
        "check the URL, the network and the store's endpoint",
    )


def _call(url: str, fn: Callable, *args, error: type[TracedocError] = TraceError, **kwargs):
    try:
        return fn(*args, **kwargs)
    except TracedocError:
        raise
    except Exception as exc:  # each store raises its own kinds; all are named for the user
        raise store_error(url, exc, error) from None


def is_prefix(url: str) -> bool:
    """Whether ``url`` names a prefix (folder) of files rather than one file."""
    if url.endswith("/"):
        return True
    if protocol(url) in ("http", "https"):
        return False
    fs, path = open_store(url)
    return bool(_call(url, fs.isdir, path))


def list_files(url: str, keep: Callable[[str], bool]) -> list[str]:
    """The URLs of the files directly under the prefix ``url`` whose base name ``keep`` accepts, sorted."""
    if protocol(url) in ("http", "https"):
        raise UsageError(
            url,
            "is a web address ending in /, and a web server lists no files",
            None,
            "pass one file's https:// URL, or put the rank files in object storage (s3://, gs://, az://)",
        )
    fs, path = open_store(url)
    entries = _call(url, fs.ls, path.rstrip("/"), detail=True)
    names = [e["name"] for e in entries if e.get("type") == "file"]
    return sorted(fs.unstrip_protocol(n) for n in names if keep(n.rstrip("/").rsplit("/", 1)[-1]))


def object_cap() -> int:
    """The largest object copied: the machine's memory (a reader holds columns of about the data's size)."""
    return memory_bytes() or FALLBACK_CAP_BYTES


def read_head(url: str, n: int, error: type[TracedocError] = TraceError) -> bytes:
    """The first ``n`` bytes of the file at ``url`` (one ranged read)."""
    fs, path = open_store(url)

    def head() -> bytes:
        with fs.open(path, "rb") as f:
            return f.read(n)

    return _call(url, head, error=error)


def _local_name(url: str) -> str:
    base = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    safe = re.sub(r"[^A-Za-z0-9._\-]", "_", base).lstrip(".")
    return safe[:200] or "input"


@contextmanager
def fetched(
    url: str, error: type[TracedocError] = TraceError, what: str = "trace file", max_bytes: int | None = None
) -> Iterator[str]:
    """A local copy of the file at ``url`` (its path), removed on leaving; a local path is passed through.

    Errors raised while the copy is read name ``url`` instead of the copy."""
    if not is_url(url):
        yield url
        return
    fs, path = open_store(url)
    cap = object_cap() if max_bytes is None else max_bytes
    info = _call(url, fs.info, path, error=error)
    if info.get("type") == "directory":
        raise error(
            url,
            f"is a prefix (a folder), not a {what}",
            None,
            "pass one file's URL, or end the URL in / to read every rank file under it",
        )
    size = info.get("size")
    if isinstance(size, int) and size > cap:
        raise error(
            url,
            f"is {size:,} bytes, more than this machine can analyse ({cap:,} bytes)",
            None,
            "analyse it on a machine with more memory, or on a cluster (--scheduler)",
        )
    folder = tempfile.mkdtemp(prefix="tracedoc-")
    local = os.path.join(folder, _local_name(url))
    try:
        if isinstance(size, int) and shutil.disk_usage(folder).free < size:
            raise error(
                url,
                f"needs {size:,} bytes of temporary space for its copy, more than is free in {tempfile.gettempdir()}",
                None,
                "free some space, or point TMPDIR at a larger disk",
            )
        _call(url, _copy, fs, path, local, url, cap, what, error, error=error)
        try:
            yield local
        except TracedocError as exc:
            raise _renamed(exc, local, url) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _copy(fs, path: str, local: str, url: str, cap: int, what: str, error: type[TracedocError]) -> None:
    fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    with fs.open(path, "rb") as src, os.fdopen(fd, "wb") as dst:
        have = 0
        while True:
            block = src.read(_BLOCK)
            if not block:
                break
            have += len(block)
            if have > cap:
                raise error(
                    url,
                    f"sends more than {cap:,} bytes, more than a {what} this machine can analyse",
                    None,
                    "check that this is the right file",
                )
            dst.write(block)


def _renamed(exc: TracedocError, local: str, url: str) -> TracedocError:
    """``exc`` with every mention of the local copy replaced by the URL it came from."""
    for attr in ("where", "what", "seen", "todo"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and local in value:
            setattr(exc, attr, value.replace(local, url))
    exc.args = (exc.message(),)
    return exc


def renamed_text(text: str, local: str, url: str) -> str:
    """A warning or message about the local copy, naming the URL instead."""
    return text.replace(local, url) if local != url else text
