"""``tracedoc.profile``: capture from inside a script, as a context manager or a decorator."""

from __future__ import annotations

import contextlib

from .report import say
from .session import CaptureConfig, CaptureSession, active_session


class profile(contextlib.ContextDecorator):
    """Profile a region of a training script the way ``tracedoc run`` profiles a whole one.

    ::

        with tracedoc.profile("traces", active=3) as prof:
            for batch in loader:
                ...
                prof.step()          # only needed when the loop has no optimizer / DataLoader

        @tracedoc.profile(on_demand_only=True)   # capture only when triggered (SIGUSR2 / TRIGGER file)
        def train(): ...

    Steps are found from optimizer steps and DataLoader batches; ``step()`` overrides both. Inside a
    job already wrapped by ``tracedoc run`` this reuses that session. Failures print one
    ``tracedoc:`` warning and never stop the code being profiled.
    """

    def __init__(
        self,
        outdir: str = "tracedoc_traces",
        *,
        skip_first: int = 5,
        warmup: int = 1,
        active: int = 3,
        on_demand_only: bool = False,
        activities: tuple[str, ...] | list[str] | None = None,
        record_shapes: bool = True,
        with_flops: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        trigger_file: str | None = None,
        signal: bool = True,
        monitor: bool = True,
        monitor_interval_s: float = 10.0,
        batch_size: int | None = None,
        report: bool = True,
        dist_timeout_s: float = 300.0,
    ):
        self.config = CaptureConfig(
            outdir=outdir,
            skip_first=skip_first,
            warmup=warmup,
            active=active,
            initial=not on_demand_only,
            activities=tuple(activities) if activities else None,
            record_shapes=record_shapes,
            with_flops=with_flops,
            profile_memory=profile_memory,
            with_stack=with_stack,
            trigger_file=trigger_file,
            signal=signal,
            monitor=monitor,
            monitor_interval_s=monitor_interval_s,
            batch_size=batch_size,
            report=report,
            dist_timeout_s=dist_timeout_s,
        )
        self.config.validate()
        self._session: CaptureSession | None = None
        self._owner = False
        self._last: CaptureSession | None = None

    def __enter__(self) -> "profile":
        existing = active_session()
        if existing is not None:
            self._session, self._owner = existing, False
            return self
        try:
            self._session = CaptureSession(self.config).install()
            self._owner = True
        except Exception as exc:
            say(f"profiling disabled ({type(exc).__name__}: {exc}); the code runs unprofiled")
            self._session = None
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        session, self._session = self._session, None
        if session is not None and self._owner:
            self._last = session
            try:
                session.close(wait_reports=exc_type is not KeyboardInterrupt)
            except KeyboardInterrupt:
                raise
            except Exception as e:
                say(f"could not finish the capture ({type(e).__name__}: {e})")
        return False

    def step(self) -> None:
        """Mark the end of one training step (for loops without an optimizer or DataLoader)."""
        s = self._session
        if s is not None:
            s.user_step()

    def trigger(self, n: int = 1) -> None:
        """Capture the next ``active`` steps, ``n`` times in a row."""
        s = self._session
        if s is not None:
            s.request_capture(n)

    @property
    def traces(self) -> list[str]:
        """Trace files written so far (complete after the ``with`` block ends)."""
        s = self._session or self._last
        return list(s.traces) if s else []

    @property
    def reports(self) -> list[str]:
        s = self._session or self._last
        return list(s.reports) if s else []

    @property
    def result(self):
        """The analysis of the last capture (an ``AnalysisResult``) once its report is written, else None.

        After the ``with`` block the reports are complete (unless ``wait_reports=False``)."""
        import os

        from ..result import load

        for txt in reversed(self.reports):
            path = txt[: -len(".txt")] + ".json"
            if os.path.exists(path):
                return load(path)
        return None


def step() -> None:
    """Mark a step boundary in the active capture session (``tracedoc run`` or ``tracedoc.profile``)."""
    s = active_session()
    if s is not None:
        s.user_step()


def trigger(n: int = 1) -> None:
    """Ask the active capture session for ``n`` captures of the next steps."""
    s = active_session()
    if s is not None:
        s.request_capture(n)
