"""Profile the same tiny CPU training loop with torch.profiler, with a sleep in data loading
(``before``) and without (``after``), alternating PAIRS times. Writes OUT/before{i}.pt.trace.json and
OUT/after{i}.pt.trace.json.

Each step trains a small model on one ready batch (about a millisecond of CPU work), then waits a
fixed WAIT_S in a ``device_wait`` range, standing for device work the host waits on. Both the
DataLoader's sleep and that wait are wall time that does not stretch when other processes share the
cores, so the step times stay those of an idle machine, within the scheduler's wake-up granularity
(a few ms at most). CPU-bound work would not: on two busy cores its wall time varies by half between
one run and the next, and a process that sleeps often gets different shares of the cores than one
that never sleeps, so a CPU-bound "before" and "after" are not comparable under load.

Usage: loader_pair.py OUT [SLEEP_S_PER_BATCH] [PAIRS] [WAIT_S]"""

import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader, Dataset

BATCH = 64


class Data(Dataset):
    """One ready batch per index (no per-sample work, no collation), after ``sleep_s``."""

    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(BATCH, 128, generator=g), torch.arange(BATCH) % 8

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.x, self.y


def run(path: Path, sleep_s: float, wait_s: float, steps: int = 10) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Data(steps + 2, sleep_s), batch_size=None, num_workers=0)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=2, active=steps),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            with record_function("device_wait"):
                time.sleep(wait_s)
            prof.step()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    torch.set_num_threads(1)
    sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.06
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    wait_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.04
    for i in range(pairs):
        run(out / f"before{i}.pt.trace.json", sleep_s, wait_s)
        run(out / f"after{i}.pt.trace.json", 0.0, wait_s)
