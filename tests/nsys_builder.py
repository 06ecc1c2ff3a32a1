"""Build small Nsight Systems SQLite exports for tests, from the real CREATE TABLE statements.

The statements are read at test time from the shared traces' ``nsys/schema/*.sql`` (dumped from real
exports of each generation). A table the chosen generation lacks comes from NVIDIA's reference copy.
Only tables something is written to are created, as nsys itself creates tables lazily. The statements
are NVIDIA's, not the project's, so the repository does not carry them: without the shared traces a
test that builds an export is skipped, with the reason.
"""

from __future__ import annotations

import re
import sqlite3
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import MISSING_REASON, TRACES, have_shared

SCHEMA_DIR = TRACES / "nsys" / "schema"
SCHEMA_MISSING_REASON = (
    f"{MISSING_REASON}; the Nsight Systems exports of this test are built from the CREATE "
    "TABLE statements of real exports kept there (NVIDIA's text, not part of the repository)"
)
SCHEMA_2021 = "schema_extrap_ex-gpu_s10.sql"
SCHEMA_2022 = "schema_extrap_concurrent_s16.sql"
SCHEMA_2026_1 = "schema_3.24.14_nsys2026.1.sql"
SCHEMA_2026_2 = "schema_3.25.0_nsys2026.2.sql"
SCHEMA_REFERENCE = "schema_nvidia_userguide_copy.sql"

_CREATE_RE = re.compile(r'CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)"?', re.I)

# nsys layout of globalTid: hardware id (63-56), VM id (55-48), PID (47-24), TID (23-0).
VM_ID = 1


def global_tid(pid: int, tid: int, hw: int = 0) -> int:
    return (hw << 56) | (VM_ID << 48) | (pid << 24) | tid


def global_pid(pid: int, hw: int = 0) -> int:
    return global_tid(pid, 0, hw)


@lru_cache(maxsize=None)
def create_statements(schema_file: str) -> dict[str, str]:
    """Table name -> its CREATE TABLE statement, as written in the schema dump."""
    text = (SCHEMA_DIR / schema_file).read_text(encoding="utf-8")
    out: dict[str, str] = {}
    buf = ""
    for line in text.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            m = _CREATE_RE.search(buf)
            if m:
                out[m.group(1)] = buf.strip()
            buf = ""
    return out


class Latin1(bytes):
    """A text value stored as raw Latin-1 bytes in a TEXT column (as old Windows exports do)."""

    @classmethod
    def of(cls, s: str) -> "Latin1":
        return cls(s.encode("latin-1"))


class NsysDb:
    """Writes an export. Times are raw ns; ``pid``/``tid`` are OS ids encoded into global ids."""

    def __init__(self, path: str | Path, schema: str = SCHEMA_2026_2, fallback: str | None = SCHEMA_REFERENCE):
        if not have_shared():
            pytest.skip(SCHEMA_MISSING_REASON)
        self.path = str(path)
        self.schema = schema
        self.fallback = fallback
        self.conn = sqlite3.connect(self.path)
        self.created: set[str] = set()
        self.string_ids: dict[str, int] = {}
        self._next_sid = 100

    # -- plumbing ----------------------------------------------------------------------------
    def table(self, name: str) -> None:
        if name in self.created:
            return
        stmt = create_statements(self.schema).get(name)
        if stmt is None and self.fallback:
            stmt = create_statements(self.fallback).get(name)
        if stmt is None:
            raise KeyError(f"no CREATE TABLE for {name} in {self.schema}")
        self.conn.execute(stmt)
        self.created.add(name)

    def columns(self, table: str) -> list[tuple[str, bool]]:
        self.table(table)
        return [(r[1], bool(r[3])) for r in self.conn.execute(f'PRAGMA table_info("{table}")')]

    def insert(self, table: str, **values) -> None:
        """Insert one row; NOT NULL columns that are not given get 0; values for columns the
        table lacks are dropped (older generations have fewer columns)."""
        cols = self.columns(table)
        names, exprs, params = [], [], []
        for col, notnull in cols:
            if col in values:
                v = values[col]
            elif notnull:
                v = 0
            else:
                continue
            names.append(f'"{col}"')
            if isinstance(v, Latin1):
                exprs.append("CAST(? AS TEXT)")
                params.append(bytes(v))
            else:
                exprs.append("?")
                params.append(v)
        self.conn.execute(f'INSERT INTO "{table}" ({", ".join(names)}) VALUES ({", ".join(exprs)})', params)

    def has_column(self, table: str, col: str) -> bool:
        return any(c == col for c, _ in self.columns(table))

    def sid(self, text: str | Latin1) -> int:
        key = text.decode("latin-1") if isinstance(text, Latin1) else text
        if key not in self.string_ids:
            self.table("StringIds")
            sid = self._next_sid
            self._next_sid += 1
            self.string_ids[key] = sid
            self.insert("StringIds", id=sid, value=text)
        return self.string_ids[key]

    def close(self) -> str:
        self.conn.commit()
        self.conn.close()
        return self.path

    # -- session, metadata, devices, names ----------------------------------------------------
    def session(self, start: int, stop: int, utc_epoch_ns: int, system_clock_ns: int | None = None) -> None:
        self.insert("ANALYSIS_DETAILS", globalVid=VM_ID << 48, duration=stop - start, startTime=start, stopTime=stop)
        self.insert(
            "TARGET_INFO_SESSION_START_TIME",
            utcEpochNs=utc_epoch_ns,
            utcTime="2026-01-01T00:00:00",
            localTime="2026-01-01T00:00:00",
            systemClockNs=start if system_clock_ns is None else system_clock_ns,
        )

    def export_meta(self, table: str = "META_DATA_EXPORT", **kv) -> None:
        for k, v in kv.items():
            self.insert(table, name=k, value=v)

    def process(self, pid: int, name: str | Latin1) -> None:
        self.insert("PROCESSES", globalPid=global_pid(pid), pid=pid, name=name)

    def thread(self, pid: int, tid: int, name: str) -> None:
        self.insert("ThreadNames", nameId=self.sid(name), priority=20, globalTid=global_tid(pid, tid))

    def gpu(self, gpu_id: int, name: str, total_memory: int, sms: int, major: int, minor: int) -> None:
        self.insert(
            "TARGET_INFO_GPU",
            vmId=VM_ID << 48,
            id=gpu_id,
            deviceId=gpu_id,
            name=name,
            totalMemory=total_memory,
            smCount=sms,
            computeMajor=major,
            computeMinor=minor,
            cuDevice=gpu_id,
        )

    # -- CUDA ---------------------------------------------------------------------------------
    def runtime(self, pid: int, tid: int, start: int, end: int, corr: int, name: str, driver: bool = False) -> None:
        self.insert(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            start=start,
            end=end,
            eventClass=1 if driver else 0,
            globalTid=global_tid(pid, tid),
            correlationId=corr,
            nameId=self.sid(name),
            returnValue=0,
        )

    def kernel(
        self,
        pid: int,
        start: int,
        end: int,
        corr: int,
        name: str | Latin1,
        device: int = 0,
        stream: int = 7,
        grid=(1, 1, 1),
        block=(128, 1, 1),
        registers: int = 32,
        static_smem: int = 0,
        dynamic_smem: int = 0,
        short_name: str | None = None,
    ) -> None:
        sid = self.sid(name)
        self.insert(
            "CUPTI_ACTIVITY_KIND_KERNEL",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=stream,
            correlationId=corr,
            globalPid=global_pid(pid),
            demangledName=sid,
            shortName=self.sid(short_name) if short_name else sid,
            registersPerThread=registers,
            gridX=grid[0],
            gridY=grid[1],
            gridZ=grid[2],
            blockX=block[0],
            blockY=block[1],
            blockZ=block[2],
            staticSharedMemory=static_smem,
            dynamicSharedMemory=dynamic_smem,
            gridId=corr,
        )

    def memcpy(
        self,
        pid: int,
        start: int,
        end: int,
        corr: int,
        nbytes: int,
        copy_kind: int,
        src_kind: int,
        dst_kind: int,
        device: int = 0,
        stream: int = 7,
    ) -> None:
        self.insert(
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=stream,
            correlationId=corr,
            globalPid=global_pid(pid),
            bytes=nbytes,
            copyKind=copy_kind,
            srcKind=src_kind,
            dstKind=dst_kind,
        )

    def memset(
        self,
        pid: int,
        start: int,
        end: int,
        corr: int,
        nbytes: int,
        mem_kind: int = 2,
        device: int = 0,
        stream: int = 7,
    ) -> None:
        self.insert(
            "CUPTI_ACTIVITY_KIND_MEMSET",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=stream,
            correlationId=corr,
            globalPid=global_pid(pid),
            value=0,
            bytes=nbytes,
            memKind=mem_kind,
        )

    def sync(
        self, pid: int, start: int, end: int, corr: int, sync_type: int, device: int = 0, stream: int = 0xFFFFFFFF
    ) -> None:
        self.insert(
            "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            start=start,
            end=end,
            deviceId=device,
            contextId=1,
            streamId=stream,
            correlationId=corr,
            globalPid=global_pid(pid),
            syncType=sync_type,
            eventId=0xFFFFFFFF,
        )

    # -- NVTX / OSRT --------------------------------------------------------------------------
    def nvtx(
        self,
        pid: int,
        tid: int,
        start: int,
        end: int | None,
        text: str | Latin1 | None = None,
        text_id: str | None = None,
        event_type: int = 59,
        domain: int = 0,
        end_tid: int | None = None,
    ) -> None:
        self.insert(
            "NVTX_EVENTS",
            start=start,
            end=end,
            eventType=event_type,
            text=text,
            textId=self.sid(text_id) if text_id is not None else None,
            domainId=domain,
            globalTid=global_tid(pid, tid),
            endGlobalTid=global_tid(pid, end_tid) if end_tid is not None else None,
        )

    def nvtx_domain(self, pid: int, tid: int, ts: int, domain: int, name: str) -> None:
        self.insert(
            "NVTX_EVENTS", start=ts, end=None, eventType=75, text=name, domainId=domain, globalTid=global_tid(pid, tid)
        )

    def osrt(self, pid: int, tid: int, start: int, end: int, name: str) -> None:
        self.insert(
            "OSRT_API",
            start=start,
            end=end,
            eventClass=27,
            globalTid=global_tid(pid, tid),
            nameId=self.sid(name),
            returnValue=0,
            nestingLevel=0,
            callchainId=0,
        )

    def cuda_gpu_2021(
        self, device: int, name: str, memory: int, sms: int, major: int, minor: int, pid: int | None = None
    ) -> None:
        """Device properties as ~2021 exports keep them (TARGET_INFO_CUDA_GPU)."""
        self.insert(
            "TARGET_INFO_CUDA_GPU",
            vmId=VM_ID << 48,
            name=name,
            globalMemorySize=memory,
            numMultiprocessors=sms,
            computeCapabilityMajor=major,
            computeCapabilityMinor=minor,
            deviceId=device,
            pid=pid,
        )
