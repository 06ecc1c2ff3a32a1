"""The plain texts every match of a name pattern must contain, used to skip names that cannot match.

``DataLoader.*__next__|dataloader`` (ignoring case) can only match a name that contains "dataloader".
Joining thousands of names into one string and looking for that text takes a few ``str.find`` calls;
running the pattern takes one regex call per name. ``pattern_mask`` runs the pattern only on the names
that hold a required text, so its answer is the pattern's own, for less work.

The required texts come from the pattern's parse tree: a run of literal characters in a sequence is in
every match of that sequence; a group or a repeat taken at least once passes on its body's texts; an
alternation requires one text of each branch (and nothing when a branch requires nothing). Anything
else (classes, anchors, lookarounds, inline flag groups) is skipped, which only ever loses precision.
A pattern that ignores case gets lower-cased texts, used only when they and the name are ASCII (where
case folding is exactly ``str.lower``); names with other characters always go to the pattern.
"""

from __future__ import annotations

import array
import bisect
import functools
import operator
import re

import numpy as np

from .required import KNOWN

try:  # Python >= 3.11
    from re import _constants as _sc
    from re import _parser as _sp
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sc  # type: ignore[no-redef]
    import sre_parse as _sp  # type: ignore[no-redef]

_SEP = "\x00"  # joins the names; a required text never holds it, so a hit never spans two names
_MIN_NAMES = 64  # fewer (and short) names: the pattern runs on each, the join would not pay
_MIN_CHARS = 4096
_USEFUL_SHARE = 0.25  # the best text is in more names than this share (and than one a ...
_CHARS_PER_FIND = 64  # ... _CHARS_PER_FIND characters): the pattern runs on every name
_TABLE_SHARE = 4  # a pattern asked about a quarter of the table or more looks in the whole table
_REPEATS = tuple(
    op
    for op in (
        getattr(_sc, "MAX_REPEAT", None),
        getattr(_sc, "MIN_REPEAT", None),
        getattr(_sc, "POSSESSIVE_REPEAT", None),
    )
    if op is not None
)
_ATOMIC = getattr(_sc, "ATOMIC_GROUP", None)
_MAX_HAYSTACK_CHARS = 16 << 20  # a table with more characters is not kept joined
_UNTESTED, _NO, _YES = 0, 1, 2  # what is known of a string, per pattern
_METHODS = ("search", "match", "fullmatch")  # a match of any of them is a match of ``search``


def pattern_of(predicate) -> re.Pattern | None:
    """The compiled text pattern behind ``predicate`` when it is that pattern's ``search``, ``match``
    or ``fullmatch``; None for any other callable."""
    owner = getattr(predicate, "__self__", None)
    if (
        isinstance(owner, re.Pattern)
        and isinstance(owner.pattern, str)
        and getattr(predicate, "__name__", None) in _METHODS
    ):
        return owner
    return None


@functools.lru_cache(maxsize=512)
def required_texts(pattern: str, flags: int) -> tuple[tuple[str, ...], ...]:
    """Alternatives of texts, each necessary for a match: every match contains at least one text of
    every tuple. Lower-cased when the pattern ignores case. Empty when nothing is known. The shipped
    patterns' answers are worked out ahead of time (``model.required``)."""
    known = KNOWN.get((pattern, flags))
    if known is not None:
        return known
    return parsed_required_texts(pattern, flags)


def parsed_required_texts(pattern: str, flags: int) -> tuple[tuple[str, ...], ...]:
    """``required_texts`` from the pattern's parse tree."""
    try:
        parsed = _sp.parse(pattern, flags)
        flags = parsed.state.flags
    except Exception:  # the pattern compiled, so this is a parser this module does not know
        return ()
    if flags & re.LOCALE:
        return ()
    return tuple(dict.fromkeys(_needs(parsed, bool(flags & re.IGNORECASE))))


def _needs(items, ignore_case: bool) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    run: list[str] = []

    def close() -> None:
        text = "".join(run)
        run.clear()
        if not text or _SEP in text:
            return
        if ignore_case:
            if not text.isascii():
                return
            text = text.lower()
        out.append((text,))

    for op, av in items:
        if op is _sc.LITERAL:
            run.append(chr(av))
            continue
        close()
        if op is _sc.SUBPATTERN:
            _group, add_flags, del_flags, body = av
            if not (add_flags or del_flags):
                out.extend(_needs(body, ignore_case))
        elif op is _sc.BRANCH:
            choices = [_best(_needs(branch, ignore_case)) for branch in av[1]]
            if choices and all(choices):
                out.append(_shortest_forms(t for c in choices for t in c))
        elif op in _REPEATS:
            if av[0] >= 1:
                out.extend(_needs(av[2], ignore_case))
        elif op is _ATOMIC:
            out.extend(_needs(av, ignore_case))
    close()
    return out


def _shortest_forms(texts) -> tuple[str, ...]:
    """The texts without those that contain another one (a name holding "iteration" holds "iter")."""
    unique = list(dict.fromkeys(texts))
    return tuple(t for t in unique if not any(o != t and o in t for o in unique))


def _best(options: list[tuple[str, ...]]) -> tuple[str, ...]:
    """Of a branch's requirements, the one whose shortest text is longest (the least common, as a rule)."""
    return max(options, key=lambda texts: (min(map(len, texts)), -len(texts)), default=())


class Haystack:
    """Names joined into one text, to tell which of them hold a given text."""

    def __init__(self, names: list[str], lengths: np.ndarray | None = None):
        self.names = names
        self.n = len(names)
        self.text = _SEP.join(names)
        if lengths is None:
            lengths = np.fromiter(map(len, names), dtype=np.int64, count=self.n)
        self.starts = array.array("q", (np.cumsum(lengths + 1) - (lengths + 1)).tobytes())  # bisect-able, 8 bytes each
        self._folded: tuple[str, np.ndarray | None] | None = None

    def _lowered(self) -> tuple[str, np.ndarray | None]:
        """The text lower-cased, and which names are not ASCII (None: all are); such a name is blanked
        in the text (the same length of separators), as lower-casing it says nothing exact."""
        if self._folded is None:
            if self.text.isascii():
                self._folded = (self.text.lower(), None)
            else:
                ascii_names = np.fromiter(map(str.isascii, self.names), dtype=bool, count=self.n)
                text = _SEP.join(s.lower() if a else _SEP * len(s) for s, a in zip(self.names, ascii_names.tolist()))
                self._folded = (text, ~ascii_names)
        return self._folded

    def candidates(self, pattern: re.Pattern) -> np.ndarray | None:
        """Which names may match ``pattern``: False only for a name that lacks every text of one of
        its requirements. None when nothing is known, or when so many names hold the text that
        finding them costs about what the pattern would."""
        required = required_texts(pattern.pattern, pattern.flags)
        if not required:
            return None
        text, others = self._lowered() if pattern.flags & re.IGNORECASE else (self.text, None)
        if len(required) > 1:
            counts = [sum(map(text.count, texts)) for texts in required]
            texts = required[int(np.argmin(counts))]
        else:
            texts = required[0]
        budget = max(_USEFUL_SHARE * self.n, len(self.text) / _CHARS_PER_FIND)
        out = np.zeros(self.n, dtype=bool)
        starts, last, found = self.starts, self.n - 1, 0
        for t in texts:
            at = text.find(t)
            while at != -1:
                k = bisect.bisect_right(starts, at) - 1
                out[k] = True
                found += 1
                if found > budget:
                    return None
                at = text.find(t, starts[k + 1]) if k < last else -1  # on to the next name
        if others is not None:
            out |= others
        return out


def worth_joining(n: int, chars: int) -> bool:
    """Whether joining these names to look for texts pays: many names, or long ones."""
    return n >= _MIN_NAMES or chars >= _MIN_CHARS


def pattern_mask(pattern: re.Pattern, predicate, names: list[str]) -> np.ndarray:
    """``bool(predicate(name))`` for every name, where ``predicate`` is ``pattern``'s search, match
    or fullmatch; the pattern runs only on the names that hold a text it requires."""
    candidates = None
    if worth_joining(len(names), sum(map(len, names))):
        candidates = Haystack(names).candidates(pattern)
    if candidates is None:
        return _run(predicate, names)
    out = np.zeros(len(names), dtype=bool)
    rows = np.flatnonzero(candidates)
    if rows.size:
        out[rows] = _run(predicate, list(map(names.__getitem__, rows.tolist())))
    return out


class PatternAnswers:
    """Answers of pattern methods over one string table, kept as they are worked out.

    ``limit`` is how many leading characters of a string a pattern sees. When a pattern is asked
    about a large share of the table, the whole table is joined into one ``Haystack`` (once, and
    kept unless it holds more than ``_MAX_HAYSTACK_CHARS`` characters); a smaller set of strings is
    joined on its own (``pattern_mask``).
    """

    def __init__(self, strings: list[str], limit: int):
        self.strings = strings
        self.n = len(strings)
        self.limit = limit
        self._answers: dict = {}  # predicate -> per string: _UNTESTED, _NO or _YES (n + 1 entries)
        self._screened: set = set()  # predicates whose non-candidates in the whole table are marked _NO
        self._haystack: Haystack | None | bool = None  # False: too large to keep

    def matched(self, predicate, pattern: re.Pattern, used: np.ndarray | None) -> np.ndarray:
        """Per string id (``n + 1`` entries, the last False): does ``predicate`` match? Exact for the
        ids in ``used`` (every id when None); other entries may not have been worked out yet."""
        state = self._answers.get(predicate)
        if state is None:
            state = self._answers[predicate] = np.full(self.n + 1, _UNTESTED, dtype=np.uint8)
            state[-1] = _NO
        todo = np.flatnonzero(state == _UNTESTED) if used is None else used[state[used] == _UNTESTED]
        if todo.size:
            table = self._table() if todo.size * _TABLE_SHARE >= self.n and todo.size >= _MIN_NAMES else None
            if table is not None:
                if predicate not in self._screened:
                    self._screened.add(predicate)
                    found = table.candidates(pattern)
                    if found is not None:
                        state[:-1][~found & (state[:-1] == _UNTESTED)] = _NO
                        todo = todo[found[todo]]
                state[todo] = np.where(_run(predicate, self._names(todo)), _YES, _NO)
            else:
                state[todo] = np.where(pattern_mask(pattern, predicate, self._names(todo)), _YES, _NO)
        return state == _YES

    def _names(self, ids: np.ndarray) -> list[str]:
        cut = operator.itemgetter(slice(None, self.limit))
        return list(map(cut, map(self.strings.__getitem__, ids.tolist())))

    def _table(self) -> Haystack | None:
        if self._haystack is None:
            lengths = np.fromiter(map(len, self.strings), dtype=np.int64, count=self.n)
            if int(np.minimum(lengths, self.limit).sum()) > _MAX_HAYSTACK_CHARS:
                self._haystack = False
            elif not self.n or int(lengths.max()) <= self.limit:  # no string is cut: join the table itself
                self._haystack = Haystack(self.strings, lengths)
            else:
                self._haystack = Haystack(self._names(np.arange(self.n)), np.minimum(lengths, self.limit))
        return self._haystack or None


def _run(predicate, names: list[str]) -> np.ndarray:
    return np.fromiter(map(bool, map(predicate, names)), dtype=bool, count=len(names))
