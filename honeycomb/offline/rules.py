"""Text rules for :class:`honeycomb.offline.model.OfflineModel`: words and crude stems, clauses,
place names, arithmetic expressions, key phrases, rendering observations, and filling a
JSON schema. Plain string handling, no AI; good enough for a demo, not for real text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

PREFIX = "[offline simulation] "


def wordset(text: str) -> frozenset[str]:
    """The words of a space-separated list."""
    return frozenset(text.split())


_STOPWORDS = wordset(
    """a an the and or but of to in on at for with by from into onto as about than then
    me my mine i we us our you your it its this that these those they them their there
    here is are was were be been being do does did done have has had will would can could
    should shall may might must please also each every all any some both either what
    what's whats how which who whom whose where when why so such very just only not no
    get give tell show make look check find use work out need want let like one two three
    four five six seven eight nine ten first next last up down over other another more
    most city cities place places day days trip travel info information result
    results data short detail details list e g eg etc"""
)
_VERBS = wordset(
    """add ask book calculate check collect compare compose compute convert count create
    deliver describe draft email estimate explain fetch figure find forecast gather get
    give list look mail make note notify outline plan post prepare put recommend report
    research save search send share show store suggest summarise summarize tell total
    translate work write what what's whats how which where when who is are can could"""
)
_LEAD_FILLERS = wordset("please also then finally and now first next")
_NOT_PLACES = wordset(
    """monday tuesday wednesday thursday friday saturday sunday weekend today tomorrow
    january february march april may june july august september october november december
    i ok hi hello dear thanks task note subject summary weather total results overall
    euro euros dollar dollars pound pounds"""
)
# Words that end a key phrase: "museums | in Rome", "things to do | there".
_PHRASE_ENDS = wordset(
    "in at near around for on during across from within inside about there here each if when "
    "while please them it"
)
# Small concept groups, so that "budget" finds a calculator and "email" an outbox.
_GROUPS = (
    "budget cost price total spend expense afford euro eur dollar calculate calculator "
    "compute arithmetic math sum multiply expression",
    "weather forecast rain rainy sunny temperature warm cold climate",
    "guide sights sightseeing museum restaurant food attraction activity things tips",
    "send email mail outbox deliver notify share inbox",
    "write summary summarise summarize report draft compose",
)
SEND_WORDS = "send write save outbox email mail notify post deliver ticket"
_NUMBERS = "zero one two three four five six seven eight nine ten"
WRITER_WORDS = "send write save report summary summarise summarize email outbox"
NUMBER_WORDS = {w: str(n) for n, w in enumerate(_NUMBERS.split())}

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_RULES = (
    ("ations", ""),
    ("ation", ""),
    ("ators", ""),
    ("ator", ""),
    ("ates", ""),
    ("ate", ""),
    ("ings", ""),
    ("ing", ""),
    ("ised", ""),
    ("ized", ""),
    ("ises", ""),
    ("izes", ""),
    ("ise", ""),
    ("ize", ""),
    ("ers", ""),
    ("er", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("sses", "ss"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("xes", "x"),
    ("ed", ""),
    ("ly", ""),
    ("s", ""),
)


def words(text: str) -> list[str]:
    """The words of a text, in order, as written."""
    return _WORD.findall(text)


def stem(word: str) -> str:
    """A crude stem: lowercase, one suffix stripped, then a final ``e``/``y``."""
    w = word.lower().replace("’", "'").removesuffix("'s")
    for suffix, replacement in _RULES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[: -len(suffix)] + replacement
            break
    return w[:-1] if len(w) > 4 and w[-1] in "ey" else w


def _stem_set(text: str) -> set[str]:
    return {stem(w) for w in words(text)}


_GROUP_STEMS = tuple(frozenset(_stem_set(g)) for g in _GROUPS)
_STOP_STEMS = frozenset(stem(w) for w in _STOPWORDS)


def stems(text: str, *, skip: Iterable[str] = (), widen: bool = True) -> set[str]:
    """Content stems of a text; words in ``skip`` are left out. ``widen`` adds the concept
    groups of the stems found (for the asking side only: a tool that mentions rain once
    is not a weather tool)."""
    skipped = {w.lower() for s in skip for w in words(s)}
    found = {
        stem(w)
        for w in words(text)
        if w.lower() not in skipped and w.lower() not in _STOPWORDS and not w.isdigit()
    }
    found -= _STOP_STEMS
    for group in _GROUP_STEMS if widen else ():
        if found & group:
            found |= group
    return found


def mentions(text: str, vocabulary: str) -> bool:
    """Whether the text uses a word of ``vocabulary`` (compared by stem)."""
    return bool(_stem_set(text) & _stem_set(vocabulary))


# --- clauses and places -----------------------------------------------------------------

_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
_JOINERS = re.compile(r"(,\s*(?:and\s+)?then\s+|\s+and\s+then\s+|,\s*and\s+|\s+and\s+|,\s*)", re.I)


def _starts_with_verb(text: str) -> bool:
    for word in words(text):
        lowered = word.lower()
        if lowered not in _LEAD_FILLERS:
            return lowered in _VERBS
    return False


def split_clauses(text: str) -> list[str]:
    """Split a task into clauses: sentences, ``;``, ``then``, and ``and``/commas that start
    a new verb phrase ("Check the weather in Paris and Rome, and find museums" gives two)."""
    clauses: list[str] = []
    for sentence in _SENTENCES.split(text):
        parts = _JOINERS.split(sentence)
        current = parts[0]
        for separator, part in zip(parts[1::2], parts[2::2], strict=True):
            if "then" in separator.lower() or _starts_with_verb(part):
                clauses.append(current)
                current = part
            else:
                current += separator + part
        clauses.append(current)
    cleaned = (c.strip(" \t.;:!?,") for c in clauses)
    return [c for c in cleaned if words(c)]


def places(text: str) -> list[str]:
    """Capitalised words that look like place names ("New York" stays one), in order."""
    found: list[str] = []
    run: list[str] = []
    end = -1
    for match in _WORD.finditer(text):
        word = match.group().replace("’", "'").removesuffix("'s")
        capital = word[0].isupper() and not word.isupper() and not word[0].isdigit()
        if capital and word.lower() not in _NOT_PLACES | _STOPWORDS | _VERBS:
            if run and text[end : match.start()] != " ":
                found.append(" ".join(run))
                run = []
            run.append(word)
            end = match.end()
        elif run:
            found.append(" ".join(run))
            run = []
    if run:
        found.append(" ".join(run))
    return list(dict.fromkeys(found))


def key_phrase(text: str) -> str:
    """The key noun phrase: leading verbs and fillers dropped, cut at a preposition."""
    tokens = words(re.split(r"[(\[:]", text, maxsplit=1)[0])
    start = 0
    while start < len(tokens) and (
        tokens[start].lower() in _VERBS | _STOPWORDS | _LEAD_FILLERS or tokens[start].isdigit()
    ):
        start += 1
    phrase: list[str] = []
    for token in tokens[start:]:
        if token.lower() in _PHRASE_ENDS or len(phrase) == 6:
            break
        phrase.append(token)
    if phrase:
        return " ".join(phrase)
    content = [t for t in tokens if t.lower() not in _STOPWORDS | _VERBS]
    return " ".join(content[:6]) or text.strip()[:60]


# --- arithmetic -------------------------------------------------------------------------

_TOKEN = re.compile(r"(?:(?<![^\s(])-)?\d+(?:,\d{3})*(?:\.\d+)?|\*\*|[-+*/×÷^()]|[^\W\d_]+")
_OPS = {
    **dict.fromkeys(("+", "plus", "and", "add"), "+"),
    **dict.fromkeys(("-", "minus", "less"), "-"),
    **dict.fromkeys(("*", "x", "×", "times", "multiplied", "at"), "*"),
    **dict.fromkeys(("/", "÷", "divided", "over"), "/"),
    **dict.fromkeys(("^", "**"), "**"),
}
_OPERATORS = frozenset(_OPS.values())
_MAX_FILLERS = 3


def expression(text: str) -> str | None:
    """The arithmetic expression in a text ("3 nights at 95 EUR plus 2 x 40" gives
    ``3 * 95 + 2 * 40``): the candidate with the most numbers, or None."""
    candidates: list[list[str]] = [[]]
    expect_operand, fillers = True, 0
    for raw in _TOKEN.findall(text):
        token = NUMBER_WORDS.get(raw.lower(), raw.lower()).replace(",", "")
        current = candidates[-1]
        if token.lstrip("-")[:1].isdigit():
            if not expect_operand and token[0] == "-" and current:
                current.append("-")  # "10 -3" is a subtraction
                token = token[1:]
            elif not expect_operand:
                candidates.append([])
            candidates[-1].append(token)
            expect_operand, fillers = False, 0
        elif token in _OPS and current and (not expect_operand or _OPS[token] == "-"):
            current.append(_OPS[token] if not expect_operand else "-")
            expect_operand, fillers = True, 0
        elif _bracket_fits(token, current, expect_operand):
            current.append(token)
        elif token != "by":  # "multiplied by", "divided by"
            fillers += 1
            if fillers > _MAX_FILLERS and current:
                candidates.append([])
                expect_operand, fillers = True, 0
    best: tuple[int, str] | None = None
    for tokens in candidates:
        text_expr = _finish(tokens)
        if text_expr is not None:
            score = sum(1 for t in tokens if t.lstrip("-")[:1].isdigit())
            if best is None or score > best[0]:
                best = (score, text_expr)
    return best[1] if best else None


def _bracket_fits(token: str, current: list[str], expect_operand: bool) -> bool:
    if token == "(":
        return expect_operand
    return token == ")" and not expect_operand and current.count("(") > current.count(")")


def _finish(tokens: list[str]) -> str | None:
    while tokens and tokens[-1] in _OPERATORS:
        tokens = tokens[:-1]
    tokens = tokens + [")"] * (tokens.count("(") - tokens.count(")"))
    if not any(t in _OPERATORS for t in tokens):
        return None
    if not _well_formed(tokens):
        return None
    return " ".join(tokens).replace("( ", "(").replace(" )", ")")


_NUMBER = re.compile(r"-?(?:[1-9]\d*|0+)(?:\.\d+)?")  # as Python writes one: no 007


def _well_formed(tokens: Sequence[str]) -> bool:
    """Whether ``tokens`` read as arithmetic (as Python reads it, less what Python
    reads as something else: ``()``, a call): numbers and operators alternate (a sign
    may also stand before a number or a bracket), a bracket opens where a number may
    stand and closes after one, and every one closes.
    Checked by hand rather than by ``ast.parse``: a sync tool may build an AST in a
    thread at the same time, and on CPython 3.11 two at once can fail."""
    expect_operand, depth = True, 0
    for token in tokens:
        if expect_operand and token in ("-", "+"):
            continue  # a sign
        if expect_operand and token == "(":
            depth += 1
        elif _NUMBER.fullmatch(token) and (expect_operand or token[0] == "-"):
            expect_operand = False  # after a number, "-3" is "- 3"
        elif not expect_operand and token == ")" and depth:
            depth -= 1
        elif not expect_operand and token in _OPERATORS:
            expect_operand = True
        else:
            return False
    return not expect_operand and depth == 0


def numbers(text: str) -> list[float]:
    """Every number written in a text, in order."""
    return [float(n.replace(",", "")) for n in re.findall(r"-?\d+(?:,\d{3})*(?:\.\d+)?", text)]


# --- tool arguments --------------------------------------------------------------------

MAX_CALLS = 12


def render(content: str, *, limit: int = 400) -> str:
    """A tool's output on one line: JSON as ``key: value`` facts, other text shortened."""
    try:
        value = json.loads(content)
    except ValueError:
        value = content
    return shorten(" ".join(_render_value(value).split()), limit)


def shorten(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: cut after its last whole word that
    fits, with "…" saying so."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if text[limit - 1].isalnum() and " " in cut:  # mid-word: back to the word's start
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.—-") + "…"


def brief_arguments(arguments: str, *, limit: int = 48) -> str:
    """A call's JSON arguments as ``name=value, ...``, each value shortened."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return arguments[:limit]
    if not isinstance(parsed, dict):
        return str(parsed)[:limit]
    shown = (f"{k}={' '.join(str(v).split())}" for k, v in parsed.items())
    return ", ".join(s if len(s) <= limit else s[: limit - 3] + "..." for s in shown)


def _render_value(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_render_value(v)}" for k, v in value.items())
    if isinstance(value, list):
        shown = [_render_value(v) for v in value[:5]]
        more = f" (+{len(value) - 5} more)" if len(value) > 5 else ""
        return " | ".join(shown) + more
    return str(value)


def bullets(text: str) -> list[str]:
    """The ``- `` bullet points of a text, without the dash."""
    return [line.strip()[2:].strip() for line in text.splitlines() if line.strip()[:2] == "- "]
