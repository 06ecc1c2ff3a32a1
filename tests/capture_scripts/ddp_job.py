"""A small DDP job (CPU torch, gloo) that profiles itself with torch.profiler, for the job-view tests.

Run under torchrun. Each rank opens its profiler after its own number of steps, so the ranks' trace
windows start at different steps, as they do when every rank follows its own schedule.

Options: --out DIR (one ``rank<R>.pt.trace.json.gz`` per rank), --wait-steps "1,2,3" (steps each rank
runs before its profiler opens; one value for all ranks), --active N (profiled steps), --bucket-mb MB
(DDP bucket size: several buckets give several all-reduces per step that overlap in time),
--sleep-rank R --sleep S (rank R sleeps S seconds per batch in its DataLoader: a slow input pipeline),
--width W and --layers L (the model: L linear layers of W x W), --late-start (each rank creates its
profiler only after its wait steps, so its ProfilerStep numbers count from its own start: the same
training step has a different number on every rank).
"""

import argparse
import gc
import gzip
import os
import shutil
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __init__(self, n, width, sleep):
        self.n, self.width, self.sleep = n, width, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        return torch.randn(self.width), torch.tensor(i % 4)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--wait-steps", default="1")
    p.add_argument("--active", type=int, default=3)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--sleep-rank", type=int, default=None)
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--late-start", action="store_true")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    waits = [int(x) for x in a.wait_steps.split(",")]
    wait = waits[rank] if len(waits) > 1 else waits[0]
    torch.manual_seed(0)
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(a.width, 4))
    model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sleep = a.sleep if a.sleep_rank in (None, rank) else 0.0
    steps = max(waits) + a.active + 2  # every rank runs the same steps; each profiles its own window
    loader = DataLoader(Data(steps * a.batch, a.width, sleep), batch_size=a.batch, num_workers=0)
    os.makedirs(a.out, exist_ok=True)
    tmp = os.path.join(a.out, f".rank{rank}.json")

    def save(prof):
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as src, gzip.open(os.path.join(a.out, f"rank{rank}.pt.trace.json.gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(tmp)

    def train(batch):
        x, y = batch
        # model and opt are deleted below, after the last step (ruff cannot see the order)
        loss = torch.nn.functional.cross_entropy(model(x), y)  # noqa: F821
        opt.zero_grad()  # noqa: F821
        loss.backward()
        opt.step()  # noqa: F821

    batches = iter(loader)
    if a.late_start:
        for _ in range(wait):
            train(next(batches))
    sched = torch.profiler.schedule(wait=0 if a.late_start else wait, warmup=1, active=a.active, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], schedule=sched, on_trace_ready=save, record_shapes=True
    ) as prof:
        for batch in batches:
            train(batch)
            prof.step()
    # free everything that holds the process group (the DDP module, its last work items) and collect
    # it now, before destroying the group: left to interpreter shutdown, a gloo worker that frees its
    # last work item must take the GIL while Python finalizes, and the process aborts (train_tiny.py)
    del model, opt, train, batches, prof, loader
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}/{world}: {steps} steps, profiled after {wait}")


if __name__ == "__main__":
    main()
