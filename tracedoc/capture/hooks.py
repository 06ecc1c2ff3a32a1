"""Installing and removing the capture session's hooks in torch (step boundaries, batch size) and SIGUSR2.

torch is imported here only by ``install_hooks``, which runs when a session starts with torch present.
"""

from __future__ import annotations

import functools
import signal

from .batch import batch_counts


def install_hooks(session) -> None:
    """Step hooks: the optimizer post-step hook, DataLoader.__next__, and a one-shot forward pre-hook for the batch
    size."""
    torch = session._torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    session._handles.append(register_optimizer_step_post_hook(session._on_opt_post_hook))

    from torch.utils.data import dataloader as dl

    cls = dl._BaseDataLoaderIter
    orig_next = cls.__dict__["__next__"]

    @functools.wraps(orig_next)
    def __next__(it):
        if session._source is None and session._loader_prev_ok:
            session._boundary()
        try:
            batch = orig_next(it)
        except StopIteration:
            session._loader_prev_ok = False
            raise
        session._loader_prev_ok = True
        session._count_batch(batch)
        return batch

    cls.__next__ = __next__
    session._restore.append((cls, "__next__", orig_next))

    if session.cfg.batch_size is None:
        from torch.nn.modules import module as mm

        box: list = []

        def fwd_pre_hook(mod, args):
            # one-shot: the first (outermost) module call tells the batch size; then the global hook
            # is removed so that modules go back to the fast call path.
            try:
                if box:
                    box[0].remove()
                    box.clear()
                s, t = batch_counts(args, torch)
                session._fwd_samples, session._fwd_tokens = s, t
            except Exception:
                pass
            return None

        box.append(mm.register_module_forward_pre_hook(fwd_pre_hook))
        session._handles.append(box[0])


def uninstall_hooks(session) -> None:
    """Remove the step hooks and wrappers, and give SIGUSR2 back to its previous handler."""
    for h in session._handles:
        try:
            h.remove()
        except Exception:
            pass
    session._handles.clear()
    for obj, name, orig in session._restore:
        try:
            if isinstance(obj, type):
                setattr(obj, name, orig)
            elif getattr(obj, name, None) is not None and getattr(getattr(obj, name), "_tracedoc_wrapped", False):
                # only undo our own wrapper, and only if nobody wrapped it since
                if orig is None:
                    delattr(obj, name)
                else:
                    setattr(obj, name, orig)
        except Exception:
            pass
    session._restore.clear()
    if session._prev_sigusr2 is not None:
        try:
            if signal.getsignal(signal.SIGUSR2) == session._on_signal:
                signal.signal(signal.SIGUSR2, session._prev_sigusr2)
        except (ValueError, OSError):
            pass
        session._prev_sigusr2 = None
