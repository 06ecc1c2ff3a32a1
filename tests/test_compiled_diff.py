"""Diffs of torch.compile runs: regions renumbered between runs ("Torch-Compiled Region: 5/0" in one,
"8/0" in the other) are matched by what they ran, their kernel sequence, with the numbers only as a
tiebreak; Triton kernels that differ only by their generated suffix are the same kernel."""

from __future__ import annotations

import pytest
from trace_builder import TraceBuilder

from tracedoc.api import analyze, diff
from tracedoc.analyses.kernels.compiled import kernel_key
from tracedoc.diff.tables import match_regions
from tracedoc.model.evidence import OperatorTotal

GELU = ["triton_poi_fused_gelu_{}", "triton_red_fused_sum_{}"]
COPY = ["triton_poi_fused__to_copy_{}", "triton_per_fused_mean_{}", "triton_poi_fused_add_{}"]


def compiled_run(path, regions: list[tuple[str, list[str], int]], steps: int = 4, slow: float = 1.0):
    """A loop whose steps call each region (name, kernel name templates, suffix) in turn."""
    b = TraceBuilder()
    t = 1_000_000.0
    for step in range(1, steps + 1):
        start = t
        gpu = t + 50.0
        for name, kernels, suffix in regions:
            r0 = t
            for k in kernels:
                b.kernel(k.format(suffix), gpu, 200.0 * slow, launch_at=t + 5.0)
                t += 20.0
                gpu += 200.0 * slow
            b.cpu_op(f"Torch-Compiled Region: {name}", r0, t + 5.0)
            t += 30.0
        t = max(t, gpu) + 50.0
        b.step(step, start, t)
    return b.write(path)


def test_renumbered_regions_are_one_region_and_suffixes_do_not_matter(tmp_path):
    # base: 0/0 runs the GELU kernels, 5/0 the copies; new: the same two regions as 8/0 (GELU) and 0/0
    # (copies), with other Triton suffixes. A name match would pair 0/0 with 0/0, which ran other work.
    base = compiled_run(tmp_path / "base.json", [("0/0", GELU, 0), ("5/0", COPY, 1)])
    new = compiled_run(tmp_path / "new.json", [("8/0", GELU, 3), ("0/0", COPY, 7)], slow=1.5)
    rows = {r.name: r for r in analyze(base).ranks[0].evidence["operator_totals"]}
    assert rows["Torch-Compiled Region: 0/0"].content_kernels == 2
    assert rows["Torch-Compiled Region: 0/0"].content != rows["Torch-Compiled Region: 5/0"].content
    d = diff(base, new)
    ops = {o.name: o for o in d.focus_pair.operators}
    regions = sorted(n for n in ops if n.startswith("Torch-Compiled Region"))
    assert regions == ["Torch-Compiled Region: 0/0 (now 8/0)", "Torch-Compiled Region: 5/0 (now 0/0)"]
    assert all(ops[n].status not in ("new", "vanished") for n in regions)
    assert ops["Torch-Compiled Region: 0/0 (now 8/0)"].gpu_after_ns == 0  # regions launch through their kernels
    kernels = {k.name: k for k in d.focus_pair.kernels}
    assert not d.focus_pair.new_kernels and not d.focus_pair.vanished_kernels
    assert kernels["triton_poi_fused_gelu"].status == "changed"  # suffix 0 and 3: one kernel, 1.5x slower
    assert kernels["triton_poi_fused_gelu"].time_after_ns == pytest.approx(
        kernels["triton_poi_fused_gelu"].time_before_ns * 1.5
    )
    text = d.to_text(width=100)
    assert "Torch-Compiled" not in text or "(now " in text  # never listed as vanished and new under two numbers
    assert not any(("new" in line or "vanished" in line) and "Torch-Compiled" in line for line in text.splitlines())


def test_numbers_break_ties_between_regions_of_equal_content():
    def region(number: str, content: str | None = "aa") -> OperatorTotal:
        return OperatorTotal(
            name=f"Torch-Compiled Region: {number}", calls=1, cpu_ns=1, gpu_ops=0, gpu_ns=0, content=content
        )

    rows_b = [region("1/0"), region("4/0")]
    rows_a = [region("5/0"), region("2/0")]
    assert match_regions(rows_b, rows_a) == {
        "Torch-Compiled Region: 2/0": "Torch-Compiled Region: 1/0",
        "Torch-Compiled Region: 5/0": "Torch-Compiled Region: 4/0",
    }
    # the same name with the same content stays itself; without content (an older report) names decide
    assert match_regions(rows_b[:1], rows_b[:1]) == {}
    assert match_regions([region("1/0", None)], [region("2/0", None)]) == {}


def test_triton_suffix_is_not_content():
    assert kernel_key("triton_poi_fused_gelu_12") == kernel_key("triton_poi_fused_gelu_3") == "triton_poi_fused_gelu"
    assert kernel_key("triton_red_fused_sum_0") != kernel_key("triton_per_fused_sum_0")
    assert kernel_key("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
