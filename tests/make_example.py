"""Build the example trace shipped in tracedoc/examples (run: python tests/make_example.py).

A single-GPU training job whose main thread waits on a single-process DataLoader at the start
of every step while the GPU sits idle: the classic input-bound run.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_builder import TraceBuilder  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "tracedoc" / "examples" / "dataloader_starved.pt.trace.json.gz"


def build() -> TraceBuilder:
    b = TraceBuilder(rank=0, world_size=1, gpu="A100", base_time_ns=1_763_700_000_000_000_000)
    b.extra_meta.update({"cuda_runtime_version": 12080, "cuda_driver_version": 12080})
    start = 1_763_700_000_000_000.0  # us
    step_us = 12_000.0
    loader_us = 5_200.0
    for i in range(6):
        s = start + i * step_us
        b.step(100 + i, s, s + step_us)
        b.dataloader(s + 2.0, s + 2.0 + loader_us)
        t = s + loader_us + 40.0
        b.memcpy(
            t + 15.0, 180.0, "HtoD", "Pageable", "Device", nbytes=64 * 3 * 224 * 224 * 4, launch_at=t, op="aten::to"
        )
        gpu_t = t + 200.0
        for k in range(48):
            if k % 3 == 0:
                name, op, dur = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4", "aten::mm", 95.0
            elif k % 3 == 1:
                name, op, dur = (
                    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>()",
                    "aten::gelu",
                    35.0,
                )
            else:
                name, op, dur = (
                    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>()",
                    "aten::sum",
                    22.0,
                )
            b.kernel(name, gpu_t, dur, launch_at=t + 30.0 + k * 6.0, op=op, blocks_per_sm=2.4, occupancy=38.0)
            gpu_t += dur + 3.0
        b.kernel(
            "void at::native::multi_tensor_apply_kernel<at::native::AdamW>()",
            gpu_t + 20.0,
            210.0,
            launch_at=gpu_t - 100.0,
            op="Optimizer.step#AdamW.step",
        )
        b.memory(s + loader_us, 150 << 20, (9 << 30) + i * (1 << 20), 12 << 30)
    return b


if __name__ == "__main__":
    build().write(OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
