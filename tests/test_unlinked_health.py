"""The missing-launch-links health message names the unlinked ops and the reason the trace shows, and blames
a torch version only where the trace records one."""

from __future__ import annotations

import pytest
from trace_builder import TraceBuilder, training_steps

import tracedoc


def _with_unlinked_copies(extra_meta: dict | None = None) -> TraceBuilder:
    """Three training steps of 20 linked kernels each, three pageable host-to-device copies per step and two
    device-to-host copies at the end, the copies recorded without a correlation id or a launch flow (11
    unlinked of 71 GPU ops: 85% linked)."""
    b = TraceBuilder(extra_meta=extra_meta or {})
    spans = training_steps(b, steps=3)
    for s, _ in spans:
        for k in range(3):
            b.memcpy(s + 8_500.0 + 300.0 * k, 200.0, src="Pageable", link=False, flow=False)
    b.memcpy(spans[-1][0] + 9_500.0, 100.0, direction="DtoH", src="Device", dst="Pageable", link=False, flow=False)
    b.memcpy(spans[-1][0] + 9_700.0, 100.0, direction="DtoH", src="Device", dst="Pageable", link=False, flow=False)
    return b


def _links_message(tmp_path, b: TraceBuilder) -> str:
    verdict = tracedoc.analyze(b.write(tmp_path / "t.pt.trace.json")).verdicts[0]
    (msg,) = [h.message for h in verdict.health if h.code == "missing-launch-links"]
    return msg


def test_names_the_unlinked_copies_and_why_without_blaming_a_version(tmp_path):
    msg = _links_message(tmp_path, _with_unlinked_copies())
    assert msg.startswith("only 85% of GPU ops are linked")
    assert "unlinked: 9 Memcpy HtoD (Pageable -> Device), 2 Memcpy DtoH (Device -> Pageable)" in msg
    assert "none carries a correlation id" in msg
    assert "torch" not in msg  # the trace records no torch version


@pytest.mark.parametrize("version, blamed", [("1.9.1", True), ("2.11.0", False)])
def test_a_torch_version_is_named_only_when_the_trace_records_an_old_one(tmp_path, version, blamed):
    msg = _links_message(tmp_path, _with_unlinked_copies({"torch_version": version}))
    assert (f"recorded with torch {version}, and torch before 1.10" in msg) is blamed
    assert ("torch" in msg) is blamed
