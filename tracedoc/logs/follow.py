"""Following a growing log (``tracedoc logs --follow``): read the lines already there, then the lines
appended, and hand each batch to the watchdog (:mod:`.watch`).

``tail -F`` semantics: the file is opened by name and its identity (device, inode) and read offset are
kept. When the name points at a new file (rotation: ``train.log`` renamed to ``train.log.1`` and a new
``train.log`` created), what is left of the old file is read to its end, then the new one from its start;
when the file is shorter than the offset (truncation, ``> train.log``), reading starts again at its start;
when the name is missing for a while (between a rename and a create), the follower waits. Only the
incomplete last line is held in memory (at most ``MAX_LINE_BYTES``), and each read takes at most
``BLOCK_BYTES``: memory stays bounded however long the log grows. The file is polled with a short sleep.

Lines are parsed by the format's own reader, a batch at a time (:func:`tracedoc.logs.reader.read_chunk`):
every format tracedoc reads can be followed, except whole-file JSON documents (``trainer_state.json``,
rewritten at each save). CSV batches are read with the file's header line.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from typing import Any

from .errors import LogError
from .watch import Finding, Watch

BLOCK_BYTES = 1 << 20
MAX_LINE_BYTES = 1 << 20
SNIFF_MAX_BYTES = 4 << 20


class Tail:
    """The complete lines appended to a file, followed by name through rotation and truncation."""

    def __init__(self, path: str):
        self.path = path
        self.fh = None
        self.ident: tuple[int, int] | None = None
        self.partial = b""
        self.notes: list[str] = []  # what happened to the file since the last call: rotated, truncated

    def _open(self) -> bool:
        try:
            fh = open(self.path, "rb")
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise LogError(self.path, "cannot be read", str(exc), "check the log path and its permissions") from None
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            fh.close()
            raise LogError(self.path, "is not a regular file", None, "--follow reads a log file that grows")
        if fh.read(2) == b"\x1f\x8b":
            fh.close()
            raise LogError(
                self.path,
                "is gzip-compressed",
                None,
                "--follow reads the plain log the job writes; analyse a compressed log without --follow",
            )
        fh.seek(0)
        self.fh, self.ident = fh, (st.st_dev, st.st_ino)
        return True

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None

    def read_lines(self) -> list[bytes]:
        """Complete lines appended since the last call (at most about ``BLOCK_BYTES`` of them)."""
        if self.fh is None and not self._open():
            return []
        data = self.fh.read(BLOCK_BYTES)
        if not data:
            data = self._check_file()
        if not data:
            return []
        buf = self.partial + data
        cut = buf.rfind(b"\n")
        if cut < 0:
            self.partial = self._bounded(buf)
            return []
        self.partial = self._bounded(buf[cut + 1 :])
        return buf[:cut].split(b"\n")

    def _bounded(self, rest: bytes) -> bytes:
        if len(rest) > MAX_LINE_BYTES:
            self.notes.append(f"a line longer than {MAX_LINE_BYTES >> 20} MiB was skipped")
            return b""
        return rest

    def _check_file(self) -> bytes:
        """At the end of the open file: a rotation or a truncation starts reading anew."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return b""  # renamed away; the new file is not there yet
        if (st.st_dev, st.st_ino) != self.ident:
            rest = self.fh.read()  # the old file's last lines, written before it was renamed
            self.close()
            self.notes.append(f"{self.path} was replaced (rotated); reading the new file from its start")
            if self._open():
                return (rest if rest.endswith(b"\n") or not rest else rest + b"\n") + self.fh.read(BLOCK_BYTES)
            return rest
        if st.st_size < self.fh.tell():
            self.fh.seek(0)
            self.partial = b""
            self.notes.append(f"{self.path} was truncated; reading it again from its start")
            return self.fh.read(BLOCK_BYTES)
        return b""


def records(series) -> list[dict[str, Any]]:
    """The rows of a batch's series as watchdog records (step times derived from elapsed time are left to
    the watchdog, which keeps the last time across batches)."""
    names = ["loss", "grad_norm", "elapsed_s", "throughput"]
    if not series.fields_seen.get("step_time_s", "").startswith("differences"):
        names.append("step_time_s")
    cols = {n: (series.columns[n], series.present[n]) for n in names if series.has(n)}
    out = []
    steps = series.step.tolist()
    for i, step in enumerate(steps):
        rec: dict[str, Any] = {"step": step}
        for n, (col, pres) in cols.items():
            if pres[i]:
                rec[n] = float(col[i])
        out.append(rec)
    return out


class Follower:
    """Reads a growing log batch by batch and feeds the watchdog; ``emit`` gets each finding and returns
    True to stop (``--fail-on``)."""

    def __init__(
        self,
        path: str,
        kind: str | None,
        watch: Watch,
        emit: Callable[[Finding], bool],
        info: Callable[[str], None],
        idle_s: float | None = None,
        clock=time.monotonic,
    ):
        self.path, self.kind, self.watch, self.emit, self.info = path, kind, watch, emit, info
        self.idle_s, self.clock = idle_s, clock
        self.tail = Tail(path)
        self.header: bytes | None = None
        self.pending: list[bytes] = []  # lines held until the format is known
        self.pending_bytes = 0
        self.last_line = clock()
        self.idle_reported = False
        self.skipped_batches = 0
        self.stopped = False

    def poll(self) -> bool:
        """Read what was appended and judge it; True when a finding asked to stop."""
        got = False
        while not self.stopped:
            lines = self.tail.read_lines()
            for note in self.tail.notes:
                self.info(note)
                if "truncated" in note or "rotated" in note:
                    self.header = None if self.kind == "csv" else self.header
            self.tail.notes.clear()
            if not lines:
                break
            got = True
            self._batch(lines)
        now = self.clock()
        if got:
            self.last_line, self.idle_reported = now, False
        elif self.idle_s and not self.idle_reported and now - self.last_line > self.idle_s and not self.stopped:
            self.idle_reported = True
            step = self.watch.last_step
            self._emit(
                Finding(
                    "no_new_line",
                    step,
                    f"no new line for {now - self.last_line:.0f} s (last step {step})",
                    f"no complete line for more than {self.idle_s:g} s",
                    {"idle_s": round(now - self.last_line, 1)},
                )
            )
        return self.stopped

    def _emit(self, finding: Finding) -> None:
        if finding.kind == "no_new_line":  # the watchdog counts the findings it makes itself
            self.watch.counts[finding.kind] = self.watch.counts.get(finding.kind, 0) + 1
        if self.emit(finding):
            self.stopped = True

    def _batch(self, lines: list[bytes]) -> None:
        lines = [ln for ln in lines if ln.strip()]
        if not lines:
            return
        if self.kind is None:
            self.pending += lines
            self.pending_bytes += sum(len(ln) + 1 for ln in lines)
            self.kind = self._sniff()
            if self.kind is None:
                return
            lines, self.pending = self.pending, []
        if self.kind == "csv":
            if self.header is None:
                self.header, lines = lines[0], lines[1:]
            lines = [self.header] + lines if lines else []
        if not lines:
            return
        from .reader import read_chunk

        try:
            series = read_chunk(self.path, b"\n".join(lines) + b"\n", self.kind)
        except LogError:
            self.skipped_batches += 1  # lines of no record (banners, warnings): nothing to judge
            return
        for line in series.story:
            self.info(line)
        offset = 0
        if any("record numbers are used as steps" in w for w in series.warnings) and self.watch.last_step is not None:
            offset = self.watch.last_step + 1
        for rec in records(series):
            rec["step"] += offset
            for finding in self.watch.feed(rec):
                self._emit(finding)
                if self.stopped:
                    return

    def _sniff(self) -> str | None:
        from .reader import sniff

        data = b"\n".join(self.pending) + b"\n"
        try:
            kind = sniff(data)
        except LogError as exc:
            if self.pending_bytes > SNIFF_MAX_BYTES:
                raise LogError(self.path, exc.what, exc.seen, exc.todo) from None
            return None
        if kind == "json":
            raise LogError(
                self.path,
                "is one JSON document (trainer_state.json?), rewritten whole, not a log that grows line by line",
                None,
                "follow the JSON Lines log the trainer appends to "
                "(LLaMA-Factory's trainer_log.jsonl, tracedoc run's steps.jsonl) or its console log",
            )
        return kind


def watch_summary(watch: Watch, follower: Follower | None, why: str) -> str:
    extra = (
        f"; {follower.skipped_batches} batches of lines held no record" if follower and follower.skipped_batches else ""
    )
    return f"tracedoc logs --follow: stopped ({why}): {watch.summary()}{extra}"


def bounded_state(watch: Watch) -> int:
    """How many values the watchdog holds (bounded by its window, whatever the log's length)."""
    return (
        len(watch.losses)
        + len(watch.step_times)
        + len(watch.rates)
        + len(watch.blocks)
        + len(watch.block)
        + len(watch.since_min)
        + len(watch.baseline_values)
    )


__all__ = ["Follower", "Tail", "bounded_state", "records", "watch_summary"]
