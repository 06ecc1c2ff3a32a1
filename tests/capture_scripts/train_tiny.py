"""A tiny CPU training job for the capture tests.

Options (argv): --steps N, --sleep S (seconds per sample in __getitem__), --exit CODE,
--step-sleep S (extra sleep per step, to give triggers time), --wait-file PATH (after each step,
if PATH exists... used by tests), --ddp (gloo process group from torchrun env), --out FILE (write
mean step time in seconds), --no-optimizer (inference loop: steps from DataLoader iteration),
--sleep-rank R (apply --sleep only on global rank R: one slow input pipeline in a DDP job).
"""

import argparse
import gc
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowData(Dataset):
    def __init__(self, n, sleep):
        self.n, self.sleep = n, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        return torch.randn(16), torch.tensor(i % 4)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument("--no-optimizer", action="store_true")
    p.add_argument("--ready-file", default=None, help="created after the first step")
    p.add_argument("--stop-file", default=None, help="run until this file exists (or --steps)")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--sleep-rank", type=int, default=None)
    a = p.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 4))
    if a.ddp:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sleep = a.sleep
    if a.sleep_rank is not None and int(os.environ.get("RANK", "0")) != a.sleep_rank:
        sleep = 0.0
    loader = DataLoader(SlowData(a.steps * a.batch, sleep), batch_size=a.batch, num_workers=0)
    times = []
    t_prev = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        if a.no_optimizer:
            with torch.no_grad():
                model(x)
        else:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if a.step_sleep:
            time.sleep(a.step_sleep)
        now = time.perf_counter()
        times.append(now - t_prev)
        t_prev = now
        if i == 0 and a.ready_file:
            open(a.ready_file, "w").close()
        if a.stop_file and os.path.exists(a.stop_file):
            break
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"mean_step_s": sum(times[2:]) / max(1, len(times) - 2), "steps": len(times)}, f)
    if a.ddp:
        # Drop everything that holds the process group (the DDP module, the last loss's autograd graph)
        # so that destroying it joins gloo's worker threads now. Left to interpreter shutdown, a worker
        # that frees its last work item must take the GIL while Python finalizes, and the process
        # aborts ("terminate called without an active exception"; 6-8 runs in 30 on 2 busy cores).
        del model, opt
        loss = x = y = None  # noqa: F841
        gc.collect()
        torch.distributed.destroy_process_group()
    print(f"trained {len(times)} steps")
    sys.exit(a.exit)


if __name__ == "__main__":
    main()
