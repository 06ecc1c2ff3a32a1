"""Profile the same tiny CPU training loop with torch.profiler, with a sleep in data loading
(``before``) and without (``after``), alternating PAIRS times so that load on the machine hits both
alike. Writes OUT/before{i}.pt.trace.json and OUT/after{i}.pt.trace.json.

Usage: loader_pair.py OUT [SLEEP_S_PER_BATCH] [PAIRS]"""

import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset


# Enough work per step (about 25-30 ms on one core) that the cold start after a sleep, about a
# millisecond, stays a small share of the step.
BATCH = 256


class Data(Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.randn(256), torch.tensor(i % 8)


def run(path: Path, sleep_s: float, steps: int = 10) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Data((steps + 2) * BATCH, sleep_s / BATCH), batch_size=BATCH, num_workers=0)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=2, active=steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()


if __name__ == "__main__":
    out = Path(sys.argv[1])
    torch.set_num_threads(1)
    sleep_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.03
    for i in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):
        run(out / f"before{i}.pt.trace.json", sleep_s)
        run(out / f"after{i}.pt.trace.json", 0.0)
