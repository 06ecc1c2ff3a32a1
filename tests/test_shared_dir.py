"""TRACEDOC_SHARED names the folder that holds traces/ or the traces folder itself; a folder with neither
is named with what was expected, never skipped in silence."""

from __future__ import annotations

from shared_dir import MARKER, traces_dir


def test_either_folder_is_accepted_and_a_wrong_one_says_what_was_expected(tmp_path, monkeypatch):
    traces = tmp_path / "shared" / "traces"
    traces.mkdir(parents=True)
    (traces / MARKER).write_text("{}")
    for given in (tmp_path / "shared", traces):
        monkeypatch.setenv("TRACEDOC_SHARED", str(given))
        assert traces_dir(tmp_path / "unused") == (traces, "")
    monkeypatch.setenv("TRACEDOC_SHARED", str(tmp_path))
    found, why = traces_dir(tmp_path / "unused")
    assert why and f"TRACEDOC_SHARED={tmp_path}" in why and MARKER in why and "traces/" in why
    monkeypatch.delenv("TRACEDOC_SHARED")
    found, why = traces_dir(tmp_path / "beside")
    assert found == tmp_path / "beside" / "traces" and "TRACEDOC_SHARED" in why
