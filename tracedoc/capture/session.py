"""The capture session: step detection, the profiler schedule, on-demand triggers and the monitor.

One session is active per process. It learns where training steps end from, in order of priority:

1. explicit ``profile.step()`` calls (source ``user``);
2. the optimizer: a global ``register_optimizer_step_post_hook`` finds the first optimizer that steps,
   whose ``step`` is then wrapped so the boundary falls *after* the ``Optimizer.step`` range closes
   (the post hook itself runs inside it);
3. DataLoader iteration, for loops without an optimizer (inference, evaluation): each
   ``DataLoader.__next__`` that follows a returned batch starts a new step.

At each boundary it feeds the step monitor, polls for triggers (a counter bumped by SIGUSR2, and the
trigger file's mtime at most every ``poll_interval_s``) and advances the current
``torch.profiler.profile``, which runs a ``torch.profiler.schedule(skip_first, warmup, active,
repeat=1)``. Between captures no profiler object exists, so the cost of a boundary is a handful of
attribute operations.

Every failure inside the session is caught, reported once on stderr (``tracedoc: ...``) and turns the
capture off; the job itself is never interrupted.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import warnings

from .batch import batch_counts
from .config import CaptureConfig, rank_and_world
from .hooks import install_hooks, uninstall_hooks
from .monitor import StepMonitor
from .output import Worker, start_report, trace_path
from ..outfiles import TMP_PREFIX
from .report import gzip_into_place, say

__all__ = ["CaptureConfig", "CaptureSession", "active_session"]

_ACTIVE: "CaptureSession | None" = None
_LOCK = threading.Lock()


def active_session() -> "CaptureSession | None":
    return _ACTIVE


class CaptureSession:
    def __init__(self, config: CaptureConfig | None = None):
        self.cfg = config or CaptureConfig()
        self.cfg.validate()
        self.traces: list[str] = []
        self.reports: list[str] = []
        self.step_count = 0
        self.installed = False
        self._warned: set[str] = set()
        self._capture_ok = True
        self._torch = None
        self._source: str | None = None
        self._primary_opt: int | None = None
        self._opt_wrapped = False
        self._loader_prev_ok = False
        self._samples: int | None = None
        self._tokens: int | None = None
        self._fwd_samples: int | None = None
        self._fwd_tokens: int | None = None
        self._handles: list = []
        self._restore: list = []
        self._prof = None
        self._prof_step = 0
        self._prof_skip = 0
        self._prof_total = 0
        # whether the step now running pays for the profiler: warm-up or recording, or the export of
        # a capture (it runs inside the boundary, after the step's end time was taken)
        self._step_profiled = False
        self._exported = False
        self._capture_idx = 0
        self._initial_pending = self.cfg.initial
        self._pending = 0
        self._signals = 0
        self._signals_seen = 0
        self._prev_sigusr2 = None
        self._next_poll = 0.0
        self._trigger_path: str | None = None
        self._trigger_key = None
        self._worker = Worker()
        self._report_procs: list[tuple[subprocess.Popen, str]] = []
        self.rank, self.world = rank_and_world()
        self.monitor: StepMonitor | None = None
        self._outdir_ok = False

    # ------------------------------------------------------------------ reporting
    def warn(self, key: str, msg: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            say(msg)

    def _capture_failed(self, what: str, exc: BaseException) -> None:
        self._capture_ok = False
        self._prof = None
        self.warn(
            "capture",
            f"capture disabled: {what} failed ({type(exc).__name__}: {exc}); training continues without profiling",
        )

    # ------------------------------------------------------------------ install / close
    def install(self) -> "CaptureSession":
        global _ACTIVE
        with _LOCK:
            if _ACTIVE is not None:
                raise RuntimeError("a tracedoc capture session is already active in this process")
            _ACTIVE = self
        self.installed = True
        cfg = self.cfg
        try:
            os.makedirs(cfg.outdir, exist_ok=True)
            self._outdir_ok = True
        except OSError as exc:
            self._capture_ok = False
            self.warn(
                "capture",
                f"cannot create the output directory {cfg.outdir} ({exc.strerror or exc}); "
                "training continues without profiling or step monitor",
            )
        if cfg.monitor:
            self.monitor = StepMonitor(
                os.path.join(cfg.outdir, "steps.jsonl") if self._outdir_ok else None,
                cfg.monitor_interval_s,
                self.rank,
                self.warn,
                cfg.batch_size,
            )
        if cfg.trigger_file != "":
            self._trigger_path = cfg.trigger_file or os.path.join(cfg.outdir, "TRIGGER")
            self._trigger_key = self._stat_trigger()  # a file already there is not a request
        if cfg.signal:
            self._install_signal()
        try:
            import torch  # noqa: F401  (lazy: tracedoc itself never needs torch)

            self._torch = torch
        except Exception as exc:
            self._capture_ok = False
            self.warn("torch", f"cannot import torch ({type(exc).__name__}: {exc}); nothing will be profiled")
            return self
        try:
            install_hooks(self)
        except Exception as exc:
            self._capture_failed("installing the step hooks", exc)
        return self

    def _install_signal(self) -> None:
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGUSR2"):
            return
        try:
            self._prev_sigusr2 = signal.signal(signal.SIGUSR2, self._on_signal)
        except (ValueError, OSError) as exc:
            self.warn("signal", f"cannot install the SIGUSR2 trigger ({exc}); use the trigger file")

    def close(self, wait_reports: bool | None = None) -> None:
        """Stop profiling (saving a capture in progress), flush the monitor, finish traces and reports."""
        global _ACTIVE
        if not self.installed:
            return
        self.installed = False
        try:
            self._close_profiler()
        finally:
            uninstall_hooks(self)
            with _LOCK:
                if _ACTIVE is self:
                    _ACTIVE = None
        if self.monitor is not None:
            try:
                line = self.monitor.close()
                say(line if self.rank == 0 or self.world == 1 else f"rank {self.rank}: {line}")
            except Exception as exc:
                self.warn("monitor", f"step monitor failed ({type(exc).__name__}: {exc})")
        self._worker.join()
        wait = self.cfg.wait_reports if wait_reports is None else wait_reports
        for proc, path in self._report_procs:
            if not wait:
                break
            if proc.poll() is None:
                say(f"waiting for the analysis of {path} (Ctrl-C to skip)")
            try:
                proc.wait()
            except Exception:
                pass

    def _close_profiler(self) -> None:
        prof = self._prof
        if prof is None:
            if self._capture_ok and self._initial_pending and self._torch is not None and self.step_count:
                self.warn(
                    "short",
                    f"the script ended after {self.step_count} steps, before the capture "
                    f"(skip {self.cfg.skip_first} + warm-up {self.cfg.warmup}); nothing "
                    "was captured; lower --skip-first",
                )
            return
        self._prof = None
        recording = self._prof_step >= self._prof_skip + self.cfg.warmup
        try:
            prof.stop()  # while recording, this saves what was captured so far (on_trace_ready)
        except Exception as exc:
            self._capture_failed("stopping the profiler", exc)
            return
        if not recording:
            self.warn(
                "short",
                f"the script ended {self._prof_step} steps into a capture that needs "
                f"{self._prof_total}; nothing was recorded",
            )

    # ------------------------------------------------------------------ triggers
    def _on_signal(self, signum, frame) -> None:
        if self.world > 1 and self._trigger_path:
            # every rank must capture the same steps: turn the signal into a touch of the shared file
            try:
                with open(self._trigger_path, "a"):
                    pass
                os.utime(self._trigger_path, None)
                self._next_poll = 0.0
                return
            except OSError:
                pass
        self._signals += 1

    def _stat_trigger(self):
        try:
            st = os.stat(self._trigger_path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_ino)

    def request_capture(self, n: int = 1) -> None:
        """Capture the next ``active`` steps ``n`` times (one after the other)."""
        self._pending += n

    # ------------------------------------------------------------------ step sources
    def user_step(self) -> None:
        self._source = "user"
        self._boundary()

    def _on_opt_post_hook(self, opt, args, kwargs) -> None:
        if self._source == "user":
            return
        if self._primary_opt is None:
            self._primary_opt = id(opt)
            self._source = "optimizer"
            self._wrap_optimizer(opt)
            self._boundary()  # this first boundary falls inside Optimizer.step; later ones after it
        elif id(opt) == self._primary_opt and not self._opt_wrapped:
            self._boundary()

    def _wrap_optimizer(self, opt) -> None:
        try:
            had_instance_attr = "step" in vars(opt)
            orig = opt.step
            session = self

            @functools.wraps(orig)
            def step(*args, **kwargs):
                out = orig(*args, **kwargs)
                if session._source == "optimizer":
                    session._boundary()
                return out

            step._tracedoc_wrapped = True
            opt.step = step
            self._opt_wrapped = True
            self._restore.append((opt, "step", orig if had_instance_attr else None))
        except Exception:
            self._opt_wrapped = False

    def _count_batch(self, batch) -> None:
        try:
            s, t = batch_counts(batch, self._torch)
        except Exception:
            return
        if s is not None:
            self._samples = (self._samples or 0) + s
            if t is not None:
                self._tokens = (self._tokens or 0) + t

    # ------------------------------------------------------------------ the boundary (hot path)
    def _boundary(self) -> None:
        now = time.perf_counter()
        self.step_count += 1
        prof = self._prof
        mon = self.monitor
        if mon is not None:
            samples, tokens = self._samples, self._tokens
            if self.cfg.batch_size is not None:
                samples = self.cfg.batch_size
            elif samples is None:
                samples, tokens = self._fwd_samples, self._fwd_tokens
            self._samples = self._tokens = None
            try:
                mon.on_step(now, self.step_count, samples, tokens, self._step_profiled)
            except Exception as exc:
                self.monitor = None
                self.warn("monitor", f"step monitor disabled ({type(exc).__name__}: {exc})")
        self._step_profiled = False
        if not self._capture_ok:
            return
        try:
            if now >= self._next_poll:
                self._next_poll = now + self.cfg.poll_interval_s
                if self._trigger_path is not None:
                    key = self._stat_trigger()
                    if key != self._trigger_key:
                        self._trigger_key = key
                        if key is not None:
                            self._pending += 1
            if self._signals != self._signals_seen:
                self._pending += self._signals - self._signals_seen
                self._signals_seen = self._signals
            if prof is not None:
                self._prof_step += 1
                if self._pending and self._prof_step <= self._prof_skip:
                    prof.stop()  # still in its skip phase: nothing recorded; the trigger takes over
                    self._prof = prof = None
                else:
                    prof.step()
                    if self._prof_step >= self._prof_total:
                        self._prof = None
                        prof.stop()
                        prof = None
            if prof is None:
                if self._pending:
                    self._pending -= 1
                    self._start_capture(0)
                elif self._initial_pending:
                    self._initial_pending = False
                    self._start_capture(self.cfg.skip_first)
            self._step_profiled = self._exported or (self._prof is not None and self._prof_step >= self._prof_skip)
            self._exported = False
        except Exception as exc:
            cur = self._prof or prof
            self._capture_failed("profiling", exc)
            self._stop_quietly(cur)

    def _stop_quietly(self, prof) -> None:
        if prof is None:
            return
        try:
            prof.on_trace_ready = None
            prof.stop()
        except Exception:
            pass

    # ------------------------------------------------------------------ profiler
    def _activities(self):
        P = self._torch.profiler.ProfilerActivity
        names = self.cfg.activities
        if names is None:
            acts = [P.CPU]
            try:
                if self._torch.cuda.is_available():
                    acts.append(P.CUDA)
            except Exception:
                pass
            return acts
        acts = []
        for n in names:
            a = getattr(P, n.strip().upper(), None)
            if a is None:
                raise ValueError(
                    f"unknown profiler activity {n!r} (known: {', '.join(x.lower() for x in P.__members__)})"
                )
            acts.append(a)
        return acts

    def _start_capture(self, skip: int) -> None:
        tp = self._torch.profiler
        cfg = self.cfg
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = tp.schedule(wait=0, warmup=cfg.warmup, active=cfg.active, repeat=1, skip_first=skip)
            prof = tp.profile(
                activities=self._activities(),
                schedule=sched,
                on_trace_ready=self._on_trace_ready,
                record_shapes=cfg.record_shapes,
                with_flops=cfg.with_flops,
                profile_memory=cfg.profile_memory,
                with_stack=cfg.with_stack,
            )
        meta = {
            "capture": self._capture_idx,
            "first_step": self.step_count,
            "skip_first": skip,
            "warmup": cfg.warmup,
            "active": cfg.active,
            "step_source": self._source or "dataloader",
        }
        if hasattr(prof, "preset_metadata_json"):
            prof.preset_metadata_json("tracedoc", json.dumps(meta))
            # Kineto traces do not say which torch wrote them; reports show this.
            prof.preset_metadata_json("torch_version", json.dumps(str(self._torch.__version__)))
        self._prof, self._prof_step, self._prof_skip = prof, 0, skip
        self._prof_total = skip + cfg.warmup + cfg.active
        prof.start()

    def _trace_target(self, idx: int) -> tuple[str | None, str]:
        self.rank, self.world = rank_and_world()
        return trace_path(self.cfg.outdir, self.rank, self.world, idx)

    def _on_trace_ready(self, prof) -> None:
        # Runs inside prof.step()/prof.stop() on the training thread: export, then hand off the rest.
        self._exported = True
        idx = self._capture_idx
        self._capture_idx += 1
        tmp = None
        try:
            group, final = self._trace_target(idx)
            fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".json", dir=os.path.dirname(final))
            os.close(fd)
            prof.export_chrome_trace(tmp)
        except Exception as exc:
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            self.warn(
                f"export{idx}", f"could not write capture {idx} ({type(exc).__name__}: {exc}); training continues"
            )
            return
        self._worker.submit(self._finish_trace, tmp, final, group)

    def _finish_trace(self, tmp: str, final: str, group: str | None) -> None:
        try:
            gzip_into_place(tmp, final)
        except Exception as exc:
            self.warn(f"write:{final}", f"could not write {final} ({type(exc).__name__}: {exc}); training continues")
            return
        self.traces.append(final)
        say(f"trace: {final}" if self.world == 1 else f"rank {self.rank} trace: {final}")
        if not self.cfg.report:
            return
        if group is not None and self.rank != 0:
            return
        target = group if group is not None else final
        try:
            proc = start_report(target, self.world if group is not None else None, self.cfg.dist_timeout_s)
        except OSError as exc:
            self.warn("report", f"could not start the analysis ({exc}); run `tracedoc analyze {target}`")
            return
        self._report_procs.append((proc, target))
        self.reports.append(target + ".report.txt")
