"""Name patterns answered through required texts give exactly the pattern's own answer."""

import ast
import random
import re

import numpy as np
import pytest

from tracedoc.analyses.kernels import classify as C
from tracedoc.model import vocab as V
from tracedoc.model import literals
from tracedoc.model.literals import pattern_mask, pattern_of, required_texts
from tracedoc.model.trace import Trace, empty_tables


@pytest.mark.parametrize(
    "pattern, flags, expected",
    [
        ("abc", 0, (("abc",),)),
        ("(?i)AbC", 0, (("abc",),)),
        ("AbC", re.I, (("abc",),)),
        (
            "^enumerate\\((DataLoader|DataPipe)\\)#|DataLoader.*__next__|dataloader",
            re.I,
            (("enumerate(", "dataloader"),),
        ),
        ("empty_cache|emptyCache", 0, (("empty",), ("_cache", "Cache"))),
        ("x{0,3}y+z", 0, (("y",), ("z",))),  # an optional repeat requires nothing
        ("a(?i:bc)d", 0, (("a",), ("d",))),  # a group with its own flags is skipped
        ("a|\\d+", 0, ()),  # a branch that requires nothing: nothing is known
        ("caf\u00e9", re.I, ()),  # not ASCII and ignoring case: not used
        ("caf\u00e9", 0, (("caf\u00e9",),)),
        ("a\x00b", 0, ()),  # the separator itself is never required
        ("(?:ab)+c", 0, (("ab",), ("c",))),
        ("step|iteration|iter", 0, (("step", "iter"),)),  # a name holding "iteration" holds "iter"
    ],
)
def test_required_texts(pattern, flags, expected):
    assert required_texts(pattern, flags) == expected


def _corpus() -> list[str]:
    rng = random.Random(7)
    alphabet = "aAbBcCdDeEkKsSiI_:.#()<>, \n\x00\u00e9\u017f\u212a\u0130\u0131"
    words = [
        "DataLoader",
        "dataloader",
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        "empty_cache",
        "emptyCache",
        "torch.nn.parallel.replicate",
        "Broadcast",
        "nccl:all_reduce",
        "aten::item",
        "ProfilerStep#12",
        "ProfilerStep#x",
        "volta_h884gemm_64x64",
        "sgemm_128_tensorop",
        "\u0130dataloader",
        "DATALOADER",
        "data\u017foader",
        "DataLoader\n__next__",
        "e\u00e9",
    ]
    out = list(words)
    for _ in range(3000):
        w = rng.choice(words)
        cut = rng.randrange(len(w) + 1)
        noise = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        out.append(rng.choice([w, w.upper(), w.swapcase(), w[:cut] + noise + w[cut:], noise]))
    return out


PATTERNS = [
    V.DATALOADER_RE,
    V.DATA_PARALLEL_RE,
    V.IMPLICIT_SYNC_OP_RE,
    V.SYNC_OP_RE,
    V.COLLECTIVE_OP_RE,
    V.PROFILER_STEP_RE,
    C.TC_RE,
    C.TC_EXCLUDE_RE,
    C.HELPER_RE,
    C.FP32_TYPED_RE,
    C.LOW_PRECISION_RE,
    re.compile("k", re.I),
    re.compile("s.*s", re.I),
    re.compile("^$"),
    re.compile("r$", re.M),
    re.compile("oader\\b"),
    re.compile("\\bdata", re.I | re.ASCII),
    re.compile("x" * 40),
]


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.pattern[:30])
def test_pattern_mask_is_the_pattern_per_name(pattern):
    names = _corpus()
    for method in (pattern.search, pattern.match, pattern.fullmatch):
        expected = [bool(method(s)) for s in names]
        assert pattern_mask(pattern, method, names).tolist() == expected


def test_pattern_of_takes_pattern_methods_only():
    p = re.compile("a")
    assert pattern_of(p.search) is p and pattern_of(p.fullmatch) is p
    assert pattern_of(p.sub) is None and pattern_of(lambda s: True) is None
    assert pattern_of(re.compile(b"a").search) is None


def _trace(strings: list[str]) -> Trace:
    return Trace(source="t", strings=strings, tables=empty_tables())


@pytest.mark.parametrize("kept_chars", [16 << 20, 100])  # the table kept joined, or joined per call
def test_string_ids_answers_again_after_a_column_and_a_changed_table(monkeypatch, kept_chars):
    monkeypatch.setattr(literals, "_MAX_HAYSTACK_CHARS", kept_chars)
    strings = [f"aten::mul, op_id = {i}" for i in range(200)] + ["enumerate(DataLoader)#x", "dataloader", "x"]
    t = _trace(strings)
    ids = np.array([200, 5, 5, -1, 202, 999], dtype=np.int32)  # out-of-range ids are no string
    m = t.string_ids(V.DATALOADER_RE.search, ids)
    assert np.flatnonzero(m).tolist() == [200]
    assert np.flatnonzero(t.string_ids(V.DATALOADER_RE.search)).tolist() == [200, 201]
    assert np.flatnonzero(t.string_ids(V.DATALOADER_RE.search, ids)).tolist() == [200]
    t.strings.append("DataLoader __next__")  # the table grew: the new string is tested too
    assert np.flatnonzero(t.string_ids(V.DATALOADER_RE.search)).tolist() == [200, 201, 203]
    t.strings = ["dataloader"] + strings  # another table: nothing is carried over
    assert np.flatnonzero(t.string_ids(V.DATALOADER_RE.search)).tolist() == [0, 201, 202, 204]
    assert t.string_ids(V.DATALOADER_RE.search)[-1] == False  # noqa: E712 - the no-name entry


def test_string_ids_keeps_a_frozensets_answer_until_the_table_changes():
    members = frozenset({"aten::mm", "aten::bmm"})
    t = _trace(["aten::mm", "aten::add", "aten::bmm"])
    first = t.string_ids(members.__contains__)
    assert first.tolist() == [True, False, True, False]
    first[:] = True  # a caller's copy: what is kept is not changed through it
    assert t.string_ids(members.__contains__).tolist() == [True, False, True, False]
    t.strings.append("aten::mm")  # the table grew
    assert t.string_ids(members.__contains__).tolist() == [True, False, True, True, False]
    t.strings = ["aten::bmm"]  # another table
    assert t.string_ids(members.__contains__).tolist() == [True, False]
    ids = np.array([0, -1])
    assert t.string_ids(members.__contains__, ids).tolist() == [True, False]


def test_kernel_class_codes_agree_with_the_vocabulary_one_name_at_a_time():
    """Kernel classes through the kept pattern answers (literal prefilter, one run per distinct name)
    are the classes vocab.kernel_class gives each full name, including names past the part patterns
    see, mixed case and non-ASCII text."""
    from tracedoc.analyses.kernels.classify import kernel_class_codes
    from tracedoc.model import trace as M
    from tracedoc.model import vocab as V
    from tracedoc.model.trace import Trace

    names = [
        "ampere_fp16_s16816gemm_fp16_128x128",
        "void at::native::vectorized_elementwise_kernel<4>",
        "FLASH_FWD_kernel",
        "cudnn::bn_fw_tr_1C11_kernel",
        "implicit_convolve_sgemm",
        "ncclKernel",
        "Memcpy HtoD",
        "triton_RED_fused_0",
        "K\u212aernel_gemm",
        "\u017fort_kernel",
        "plain",
        "",
        "x" * (M.MATCH_CHARS + 5) + "gemm",
        "Layer_Norm" + "y" * 40,
        "softmax_warp_forward",
    ]
    names += [f"kernel_{i}_{w}" for i, w in enumerate(["add", "mul", "scan", "im2col", "cutlass", "relu"] * 20)]
    trace = Trace("t", names, {})
    ids = np.arange(len(names))
    want = [V.KERNEL_CLASSES.index(V.kernel_class(n)) for n in names]
    assert kernel_class_codes(trace, ids).tolist() == want
    assert kernel_class_codes(trace, ids[::-1]).tolist() == want[::-1]
    # precedence worked by hand: norms before convolution, convolution before GEMM, the whole long name
    by_hand = {
        "FLASH_FWD_kernel": "attention",
        "cudnn::bn_fw_tr_1C11_kernel": "reduction",
        "implicit_convolve_sgemm": "convolution",
        "x" * (M.MATCH_CHARS + 5) + "gemm": "GEMM",
        "plain": "other",
        "": "other",
    }
    got = kernel_class_codes(trace, ids).tolist()
    for name, cls in by_hand.items():
        assert V.KERNEL_CLASSES[got[names.index(name)]] == cls, name


def _module_patterns() -> set[tuple[str, int]]:
    """(pattern, flags) of every compiled text pattern at module level in the packages that read a trace's
    name tables (the model, the readers, the analyses and the job view)."""
    import importlib
    import pkgutil
    import re as _re

    out = set()
    names = ["tracedoc.model", "tracedoc.ingest", "tracedoc.analyses", "tracedoc.job"]
    for package in list(names):
        names += [i.name for i in pkgutil.walk_packages(importlib.import_module(package).__path__, package + ".")]
    for name in names:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if isinstance(value, _re.Pattern) and isinstance(value.pattern, str):
                out.add((value.pattern, value.flags))
    return out


def _literal(pattern: str) -> str:
    """The pattern as a Python literal for the table; one with white space too long for a 120-column line as
    adjacent literals, each cut after a ``|`` (a line without white space may run long)."""
    if len(repr(pattern)) <= 100 or not any(c.isspace() for c in repr(pattern)):
        return repr(pattern)
    pieces = []
    while len(pattern) > 90:
        cut = pattern.rfind("|", 0, 90) + 1 or 90
        pieces.append(pattern[:cut])
        pattern = pattern[cut:]
    return "\n     ".join(map(repr, [*pieces, pattern]))


def test_precomputed_required_texts_are_the_parsers_for_every_module_pattern():
    from tracedoc.model.literals import parsed_required_texts
    from tracedoc.model.required import KNOWN

    live = {}
    for pattern, flags in sorted(_module_patterns()):
        texts = parsed_required_texts(pattern, flags)
        if texts:
            live[(pattern, flags)] = texts
    table = "\n".join(f"    ({_literal(p)}, {f}):\n        {t!r}," for (p, f), t in sorted(live.items()))
    assert ast.literal_eval("{\n" + table + "\n}") == live  # the table to paste reads back as the parser's texts
    assert KNOWN == live, f"tracedoc/model/required.py is out of date; its KNOWN should read:\n{table}"
