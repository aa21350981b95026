"""What to write instead, for the YAML mistakes people make most: PyYAML says what its
parser expected (``expected <block end>, but found '<block mapping start>'``), which
names the grammar, not the fix. :func:`plain_words` reads where the mistake is and
says, in the words of the file (its lines, indents and values), what to change.

A hint never quotes the document (its line may hold a secret): only line numbers,
indents and YAML's own characters.
"""

from __future__ import annotations

import re

import yaml

__all__ = ["odd_space", "plain_words"]

_QUOTES = "put the whole value in quotes"
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # YAML's, as PyYAML counts lines
_CLOSERS = {"[": "]", "{": "}", '"': '"', "'": "'"}
_MEANS = {"[": "a list", "{": "a mapping", '"': "a quoted text", "'": "a quoted text"}


def plain_words(exc: yaml.MarkedYAMLError, text: str) -> tuple[str, yaml.Mark] | None:
    """What is wrong and what to write instead, for a mistake whose PyYAML error is
    one of the common ones, and where it is; None for the others (PyYAML's own words
    are kept)."""
    said = _words(exc, text)
    if said is None or exc.problem_mark is None:
        return None
    if "simple key" in (exc.context or "") and exc.context_mark is not None:
        return said, exc.context_mark  # the key without ':', not the line after it
    return said, exc.problem_mark


def _words(exc: yaml.MarkedYAMLError, text: str) -> str | None:
    problem, context = exc.problem or "", exc.context or ""
    mark, opened = exc.problem_mark, exc.context_mark
    if mark is None:
        return None
    lines = _LINE_BREAK.split(text)
    line = lines[mark.line] if mark.line < len(lines) else ""
    if "'\\t'" in problem:
        return "a tab, where YAML takes spaces only: write spaces in its place"
    if "cannot start any token" in problem:
        char = line[mark.column : mark.column + 1]
        return f"a value cannot begin with {char!r} (YAML reserves it): {_QUOTES}"
    if "while scanning an alias" in context:
        return f"a value that begins with '*' is an alias of an anchor (&name): {_QUOTES}"
    if problem.startswith("found undefined alias"):
        return (
            "a value that begins with '*' is an alias, and no anchor (&name) of its name "
            f"comes before it: define the anchor above, or {_QUOTES}"
        )
    if context.startswith("found duplicate anchor") and opened is not None:
        return (
            f"a second anchor of the name of the one on line {opened.line + 1} (&name: YAML "
            "takes each name once): give this one a name of its own, and its aliases (*name) "
            "with it"
        )
    if "expected a single document" in context:
        return (
            "a second document ('---') in the file, which holds one: remove the line '---' "
            "(and merge what follows it into the first)"
        )
    if "while scanning an anchor" in context:
        return f"a value that begins with '&' names an anchor: {_QUOTES}"
    if "could not determine a constructor for the tag" in problem:
        return f"a value that begins with '!' is a YAML tag: {_QUOTES}"
    if problem == "mapping values are not allowed here":
        return _colon(lines, mark)
    if problem == "sequence entries are not allowed here":
        return f"a value that begins with '- ' is read as a list's item: {_QUOTES}"
    if problem == "mapping keys are not allowed here":
        return f"a value that begins with '? ' is read as a key: {_QUOTES}"
    if problem == "could not find expected ':'" and "simple key" in context:
        return (
            "this line is read as a key, and no ':' follows it: write 'key: value' (the "
            "lines of a text under 'key: |' are indented deeper than its key)"
        )
    if problem.startswith("expected <block end>") and opened is not None:
        return _block_end(problem, line, mark, opened)
    if problem.startswith("expected '<document start>'"):
        return (
            "this line is indented otherwise than the first key of the file: begin every "
            "top-level key at the start of its line"
        )
    flow = problem.startswith(("expected ',' or ']'", "expected ',' or '}'"))
    if flow and opened is not None and mark.index < len(text):  # at its end: left open
        kind = "list" if "]" in problem else "mapping"
        close = "]" if kind == "list" else "}"
        return (
            f"the {kind} begun with {'[' if kind == 'list' else '{'!r} on line "
            f"{opened.line + 1} is not closed before this: end it with {close!r} (a text "
            f"that begins with it goes in quotes)"
        )
    return None


_ODD_SPACES = "\u00a0\u2000-\u200a\u202f\u205f\u3000"
_ODD_SPACE = re.compile(
    rf"^[ ]*(?P<indent>[{_ODD_SPACES}])"  # in the indentation
    rf"|^[ ]*-(?P<item>[{_ODD_SPACES}])"  # after a list item's dash
    rf"|^[ ]*(?:-[ ]+)?[\w.-]+:(?P<colon>[{_ODD_SPACES}])",  # after a key's colon
    re.MULTILINE,
)


def odd_space(text: str) -> tuple[str, int, int] | None:
    """A space YAML does not read as one where YAML needs a space: a non-breaking
    space (U+00A0, which a page copied from a browser holds) or another of Unicode's,
    in a line's indentation or after a key's ':' or a list item's '-'. YAML reads it as
    text, so the line's key took it in, or its value swallowed the key, and the errors
    that followed named neither. What is wrong, and the line and column (1-based)."""
    # Every line break as "\n", at the same places (CRLF as " \n"), for ^ to see lines.
    found = _ODD_SPACE.search(text.replace("\r\n", " \n").replace("\r", "\n"))
    if found is None:
        return None
    group = next(name for name in ("indent", "item", "colon") if found.group(name) is not None)
    at = found.start(group)
    line = len(_LINE_BREAK.findall(text, 0, at)) + 1
    column = at - max(text.rfind(c, 0, at) for c in "\n\r")
    code = ord(found.group(group))
    what = "a non-breaking space (U+00A0, as text copied from a web page holds)"
    if code != 0xA0:
        what = f"a U+{code:04X} space"
    said = f"{what}, where YAML takes plain spaces only: write a space in its place"
    return said, line, column


def _colon(lines: list[str], mark: yaml.Mark) -> str:
    """A ': ' where no key may begin: inside a value, or on a line read as the rest of
    the line above it."""
    line = lines[mark.line] if mark.line < len(lines) else ""
    before = line[: mark.column].strip()
    key_first = before.removeprefix("- ").strip()
    if ": " in key_first or key_first.endswith(":"):
        return f"the value holds ': ', which YAML reads as a key: {_QUOTES}"
    above = _line_above(lines, mark.line)
    if above is None:
        return f"a ': ' where no key may begin: {_QUOTES}"
    number, text = above
    keyless = ":" not in text and not text.lstrip().startswith("- ")
    if not keyless and _indent(text) < _indent(line):
        return (
            f"this line is indented deeper than line {number}, so it is read as the rest "
            f"of that line's value: indent it as the keys beside it, or line {number} as "
            "this one if that is the line out of place"
        )
    return (
        f"line {number} has no ':' after its key, so this line is read as the rest of it: "
        "end the key there with ':'"
    )


def _block_end(problem: str, line: str, mark: yaml.Mark, opened: yaml.Mark) -> str:
    """Something where a block mapping or list had to end: a value going on after it
    closed, or a line indented as nothing above it is."""
    if line[: mark.column].strip():  # not the first thing on its line
        value = _value_start(line[: mark.column])
        if value in _CLOSERS:
            twice = " (a quote inside a quoted text is written twice: 'it''s')"
            return (
                f"the value begins with {value!r}, which YAML reads as {_MEANS[value]} that "
                f"ends with {_CLOSERS[value]!r}, and goes on after it: {_QUOTES}"
                + (twice if value in "'\"" else "")
            )
        return f"more follows a complete value on this line: {_QUOTES}"
    if problem.endswith(("'-'", "'<block sequence start>'")):
        return (
            f"a list item ('- ') is indented as the keys of line {opened.line + 1}: indent "
            "it under the key whose list it is, as the items above it"
        )
    if problem.endswith("'?'"):
        return (
            f"a key among the items of the list begun on line {opened.line + 1}: begin it "
            "with '- ' if it is an item, or indent it as the key the list belongs to"
        )
    return (
        f"this line is indented {mark.column} spaces, as no key above it is (the keys "
        f"beside it, from line {opened.line + 1}, are indented {opened.column}): indent it "
        "as the keys beside it"
    )


def _value_start(before: str) -> str:
    """The first character of the value the text ``before`` a mistake holds (what
    follows its key's ``': '``, or a list item's ``'- '``)."""
    head = before.lstrip()
    key, colon, rest = head.partition(": ")
    value = rest.lstrip() if colon else head.removeprefix("- ").lstrip()
    if colon and key.startswith("- "):
        value = rest.lstrip()
    return value[:1]


def _line_above(lines: list[str], index: int) -> tuple[int, str] | None:
    """The nearest line above ``lines[index]`` that holds more than a comment, with
    its number (1-based)."""
    for above in range(min(index, len(lines)) - 1, -1, -1):
        text = lines[above]
        if text.strip() and not text.lstrip().startswith("#"):
            return above + 1, text
    return None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))
