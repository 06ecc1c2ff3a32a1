"""Fixed costs of loading the rules: a bare name compiles to the tree Python's parser gives it, the rule
files are read once for the cache's key and the rules' version, each read sized to its file."""

from __future__ import annotations

import ast
import types

import pytest

from tracedoc.engine import ExprError, compile_expr, load_ruleset, rules_version
from tracedoc.engine import expr as E
from tracedoc.engine import rulecache, rulefile
from tracedoc.resources import data_dir

NAMES = {"steps": "num", "flag": "bool", "name": "str", "_": "num", "match": "num", "type": "str", "x1": "num"}


def _parsed_only(monkeypatch):
    """compile_expr with every text taken through Python's parser (no name is a bare name)."""
    monkeypatch.setattr(E, "keyword", types.SimpleNamespace(iskeyword=lambda text: True))


def _describe(e):
    return (e.source, ast.dump(e.tree, include_attributes=True), sorted(e.names), e.type)


@pytest.mark.parametrize("source", ["steps", " steps ", "flag", "name", "_", "match", "type", "x1"])
def test_a_bare_name_compiles_as_the_parser_would(source, monkeypatch):
    fast = _describe(compile_expr(source, NAMES))
    _parsed_only(monkeypatch)
    assert fast == _describe(compile_expr(source, NAMES))


@pytest.mark.parametrize("source", ["stepz", "None", "True", "not", "lambda", "ﬁ", "steps steps", "1steps"])
def test_other_texts_fail_or_compile_as_the_parser_says(source, monkeypatch):
    def outcome():
        try:
            return _describe(compile_expr(source, NAMES))
        except ExprError as exc:
            return str(exc)

    fast = outcome()
    _parsed_only(monkeypatch)
    assert fast == outcome()


def test_the_version_comes_from_the_reads_of_the_cache_key(tmp_path, monkeypatch):
    want = rules_version()
    for cache in (str(tmp_path / "cache"), str(tmp_path / "cache"), "off"):  # miss, hit, no cache
        monkeypatch.setenv("TRACEDOC_CACHE_DIR", cache)
        monkeypatch.setattr(rulecache, "_loaded", {})
        assert load_ruleset().version == want
        # with the cache the version comes from the bytes read for its key; without, it is read apart
        assert rulefile.load_rules_and_version()[1] == (None if cache == "off" else want)


def test_rule_files_are_read_whole_and_bounded(tmp_path):
    small, big = tmp_path / "a.toml", tmp_path / "b.toml"
    small.write_bytes(b"x" * 100)
    big.write_bytes(b"y" * 5000)
    assert rulecache.read_files([small], 4096) == [b"x" * 100]
    assert rulecache.read_files([small, big], 4096) is None  # too large: the files are read one by one
    assert rulecache.read_files([small, tmp_path / "gone.toml"], 4096) is None
    paths = rulefile.rule_files(data_dir("rules"))
    assert rulecache.read_files(paths, rulefile.MAX_RULE_FILE_BYTES) == [p.read_bytes() for p in paths]
