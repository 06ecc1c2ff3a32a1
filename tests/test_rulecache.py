"""The cache of validated rule sets: a hit gives the rules the files give, and any change to the files,
a damaged entry, an unwritable directory or concurrent writers fall back to reading the files."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracedoc.engine import rulecache, rulefile
from tracedoc.engine.rulefile import RuleError, load_rules
from tracedoc.resources import data_dir

ROOT = Path(__file__).resolve().parents[1]


def describe(rules):
    """Everything a rule holds, as plain text (expression trees through ``ast.dump``)."""

    def expr(e):
        return None if e is None else (e.source, ast.dump(e.tree), sorted(e.names), e.type)

    def template(t):
        return (t.source, [(text, expr(e), spec) for text, e, spec in t.parts])

    return [
        (
            r.id,
            r.name,
            r.title,
            r.label,
            r.severity,
            expr(r.when),
            expr(r.impact),
            template(r.message),
            template(r.expect),
            [(template(f.text), expr(f.when)) for f in r.fixes],
            repr(r.docs),
            str(r.path),
            repr(sorted(r.params.items())),
            r.evidence,
            r.requires_no_other_verdict,
            r.requires_gpu,
            r.what_if,
            repr(r.tests),
            r.scope,
        )
        for r in rules
    ]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(directory))
    monkeypatch.setattr(rulecache, "_loaded", {})
    return directory


@pytest.fixture
def rules_dir(tmp_path):
    """A copy of the shipped rules, loaded as a user directory (``builtin=False``)."""
    directory = tmp_path / "rules"
    shutil.copytree(data_dir("rules"), directory, ignore=shutil.ignore_patterns("*.md"))
    return directory


def entries(directory):
    return sorted(directory.glob("rules-*.json"))


def fresh(monkeypatch):
    """Forget what this process loaded, as a new process would."""
    monkeypatch.setattr(rulecache, "_loaded", {})


def test_hit_gives_the_rules_the_files_give(cache, rules_dir, monkeypatch):
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", "off")
    from_files = describe(load_rules([rules_dir], builtin=False))
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(cache))
    assert describe(load_rules([rules_dir], builtin=False)) == from_files  # miss: read, checked, stored
    assert len(entries(cache)) == 1
    fresh(monkeypatch)
    calls = []
    monkeypatch.setattr("tracedoc.engine.rulefile._load_rule_file", lambda p: calls.append(p))
    monkeypatch.setattr("tracedoc.engine.rulefile.parse_rule_text", lambda *a: calls.append(a))
    assert describe(load_rules([rules_dir], builtin=False)) == from_files  # hit: no file is parsed
    assert calls == []


def test_a_changed_added_or_removed_file_is_read_again(cache, rules_dir, monkeypatch):
    load_rules([rules_dir], builtin=False)
    path = sorted(rules_dir.glob("*.toml"))[0]
    text = path.read_text()
    title = next(line for line in text.splitlines() if line.startswith("title"))
    path.write_text(text.replace(title, 'title = "A changed title"'))
    fresh(monkeypatch)
    assert load_rules([rules_dir], builtin=False)[0].title == "A changed title"
    (rules_dir / "zz_copy.toml").write_text(text.replace(title, 'title = "A copy"'))
    fresh(monkeypatch)
    with pytest.raises(RuleError, match="duplicate rule id"):  # the new file is seen, though a key was stored
        load_rules([rules_dir], builtin=False)
    (rules_dir / "zz_copy.toml").unlink()
    path.unlink()
    fresh(monkeypatch)
    assert path.stem not in {r.path.stem for r in load_rules([rules_dir], builtin=False)}


def test_an_invalid_edit_is_reported_after_a_valid_load(cache, rules_dir, monkeypatch):
    load_rules([rules_dir], builtin=False)
    path = sorted(rules_dir.glob("*.toml"))[0]
    path.write_text("bogus_field = 1\n" + path.read_text())
    fresh(monkeypatch)
    with pytest.raises(RuleError, match="unknown field 'bogus_field'"):
        load_rules([rules_dir], builtin=False)
    assert len(entries(cache)) == 1  # a rule set with problems is never stored


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "other-key"])
def test_a_damaged_entry_is_a_miss_and_is_rewritten(cache, rules_dir, monkeypatch, damage):
    want = describe(load_rules([rules_dir], builtin=False))
    (entry,) = entries(cache)
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        entry.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "garbage":
        entry.write_bytes(os.urandom(len(data)))
    elif damage == "empty":
        entry.write_bytes(b"")
    else:  # a whole, well-formed entry of other rules under this name
        other = rules_dir.parent / "other"
        other.mkdir()
        shutil.copy(sorted(rules_dir.glob("*.toml"))[0], other)
        fresh(monkeypatch)
        load_rules([other], builtin=False)
        other_entry = next(p for p in entries(cache) if p != entry)
        os.replace(other_entry, entry)
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want
    fresh(monkeypatch)
    paths = sorted(rules_dir.glob("*.toml"))
    assert rulecache.load(key_of(rules_dir), paths) is not None  # the miss stored a good entry again


def test_an_entry_that_is_not_a_regular_file_is_a_miss(cache, rules_dir, monkeypatch):
    want = describe(load_rules([rules_dir], builtin=False))
    (entry,) = entries(cache)
    entry.unlink()
    os.mkfifo(entry)  # opening it for reading would wait for a writer
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want


def test_an_unusable_cache_directory_falls_back_silently(tmp_path, rules_dir, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", str(blocker / "cache"))
    fresh(monkeypatch)
    want = describe(load_rules([rules_dir], builtin=False))
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want
    assert blocker.read_text() == "not a directory"


def test_cache_directory_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEDOC_CACHE_DIR", "off")
    assert rulecache.cache_dir() is None
    monkeypatch.delenv("TRACEDOC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert rulecache.cache_dir() == tmp_path / "tracedoc"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert rulecache.cache_dir() == Path.home() / ".cache" / "tracedoc"


def test_old_entries_are_pruned(cache, tmp_path, monkeypatch):
    source = sorted(data_dir("rules").glob("*.toml"))[0]
    for i in range(rulecache._KEEP + 4):
        d = tmp_path / f"d{i}"
        d.mkdir()
        shutil.copy(source, d)
        fresh(monkeypatch)
        load_rules([d], builtin=False)
    assert len(entries(cache)) == rulecache._KEEP


CHILD = """
import sys
from tracedoc.engine.rulefile import load_rules
print(len(load_rules([sys.argv[1]], builtin=False)))
"""


def test_concurrent_processes_share_one_cold_cache(cache, rules_dir):
    env = dict(os.environ, TRACEDOC_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    want = str(len(list(rules_dir.glob("*.toml"))))
    for _ in range(2):  # a cold cache written by all at once, then read by all at once
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(rules_dir)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [(p.returncode, o.strip(), e) for p, (o, e) in zip(procs, outs)] == [(0, want, "")] * 4
        assert len(entries(cache)) == 1
        assert not list(cache.glob(".rules-*"))  # no temporary file left behind


# Attacks by another local user on the cache. Each plants an entry, under the name and with the header
# tracedoc looks for, whose payload runs code when unpickled (it touches a marker file and gives an empty
# rule list); the rules must still come from their files and the marker must never appear. The tests run
# as any user: "another user" is user id 65534 (nobody), and the checks compare with os.getuid().
NOBODY = 65534


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return eval, (f"(__import__('pathlib').Path({self.marker!r}).touch(), [])[1]",)


def planted(key, marker):
    """The bytes of an entry for ``key`` whose payload is a pickle that runs code."""
    import hashlib
    import pickle

    payload = pickle.dumps(_Payload(marker))
    return rulecache._MAGIC + bytes.fromhex(key) + hashlib.sha256(payload).digest() + payload


def key_of(rules_dir):
    paths = sorted(rules_dir.glob("*.toml"))
    return rulecache.rules_key(paths, rulecache.read_files(paths, rulefile.MAX_RULE_FILE_BYTES), rulefile._VOCABULARY)


def entry_path(directory, key):
    return directory / rulecache._entry_name(key)


@pytest.fixture
def refused(monkeypatch):
    monkeypatch.setattr(rulecache, "_refused", set())


def test_a_symlink_in_a_writable_cache_directory_runs_no_code(cache, rules_dir, tmp_path, monkeypatch, capsys, refused):
    want = describe(load_rules([rules_dir], builtin=False))
    key, marker = key_of(rules_dir), tmp_path / "marker"
    victim_file = tmp_path / "downloaded-trace.json"  # the victim's own file, its bytes chosen by the attacker
    victim_file.write_bytes(planted(key, marker))
    entry = entry_path(cache, key)
    entry.unlink()
    entry.symlink_to(victim_file)
    os.chmod(cache, 0o1777)  # anyone may write the directory (as /tmp)
    for _ in range(2):
        fresh(monkeypatch)
        assert describe(load_rules([rules_dir], builtin=False)) == want
    assert not marker.exists()
    err = capsys.readouterr().err
    assert err.count("rule cache") == 1 and "group or others may write to it (mode 1777)" in err
    assert entry.is_symlink()  # the unsafe directory was not written either
    # The same link in a directory that is safe: the link is not followed.
    os.chmod(cache, 0o700)
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want
    assert not marker.exists() and capsys.readouterr().err == ""


def test_a_cache_directory_of_another_user_is_not_used(cache, rules_dir, tmp_path, monkeypatch, capsys, refused):
    want = describe(load_rules([rules_dir], builtin=False))
    key, marker = key_of(rules_dir), tmp_path / "marker"
    entry = entry_path(cache, key)
    entry.write_bytes(planted(key, marker))
    os.chown(entry, NOBODY, NOBODY)
    os.chown(cache, NOBODY, NOBODY)
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want
    assert not marker.exists()
    assert f"belongs to user id {NOBODY}, not to you (user id {os.getuid()})" in capsys.readouterr().err


def test_a_group_writable_default_cache_directory_runs_no_code(rules_dir, tmp_path, monkeypatch, capsys, refused):
    monkeypatch.delenv("TRACEDOC_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    default = tmp_path / "home" / ".cache" / "tracedoc"
    assert rulecache.cache_dir() == default
    fresh(monkeypatch)
    want = describe(load_rules([rules_dir], builtin=False))
    assert stat_mode(default) == 0o700  # created private
    key, marker = key_of(rules_dir), tmp_path / "marker"
    os.chmod(default, 0o770)  # the group may write it: a member replaces the entry
    entry = entry_path(default, key)
    entry.unlink()
    entry.write_bytes(planted(key, marker))
    entry.chmod(0o600)
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want
    assert not marker.exists()
    assert "group or others may write to it (mode 0770)" in capsys.readouterr().err


def stat_mode(path):
    import stat

    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_world_writable_entry_rewritten_in_place_runs_no_code(cache, rules_dir, tmp_path, monkeypatch):
    want = describe(load_rules([rules_dir], builtin=False))
    key, marker = key_of(rules_dir), tmp_path / "marker"
    entry = entry_path(cache, key)
    assert stat_mode(entry) == 0o600
    entry.chmod(0o666)
    with open(entry, "r+b") as f:  # another user rewrites the victim's own file
        f.truncate()
        f.write(planted(key, marker))
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want
    assert not marker.exists()
    # Even in a safe directory and file, the entry's pickle is never loaded: it is not the cache's format.
    entry.chmod(0o600)
    fresh(monkeypatch)
    assert describe(load_rules([rules_dir], builtin=False)) == want
    assert not marker.exists()


def test_an_entry_is_checked_as_a_rule_file_is(cache, rules_dir, monkeypatch):
    """A well-formed entry whose tables no rule file could hold is a miss: an expression that calls code,
    a rule whose fields are of the wrong type."""
    import hashlib
    import json

    want = describe(load_rules([rules_dir], builtin=False))
    key = key_of(rules_dir)
    entry = entry_path(cache, key)
    good = json.loads(entry.read_bytes()[len(rulecache._MAGIC) + 64 :])
    for damage in ({"when": "__import__('os').system('true')"}, {"severity": ["high"]}, {"params": {"x": {}}}):
        tables = [[path, {**table, **damage}] if i == 0 else [path, table] for i, (path, table) in enumerate(good)]
        payload = json.dumps(tables).encode()
        entry.write_bytes(rulecache._MAGIC + bytes.fromhex(key) + hashlib.sha256(payload).digest() + payload)
        fresh(monkeypatch)
        assert describe(load_rules([rules_dir], builtin=False)) == want


def test_a_huge_entry_is_refused_before_it_is_read(cache, rules_dir, monkeypatch):
    import tracemalloc

    want = describe(load_rules([rules_dir], builtin=False))
    entry = entry_path(cache, key_of(rules_dir))
    with open(entry, "r+b") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB on paper, nothing on disk
    fresh(monkeypatch)
    tracemalloc.start()
    try:
        got = describe(load_rules([rules_dir], builtin=False))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == want
    assert peak < 64 << 20
