"""The YAML mistakes people make most are told in words that say what to write
instead, at their line: a tab, a line indented as nothing above it, a ': ' or a
leading '{', '[', '*', '@' inside a value, a list where a mapping goes and text where
a list goes, yes/no read as booleans, a misspelt choice; never PyYAML's grammar
(``expected <block end>, but found '<block mapping start>'``) nor Python's types
(``a valid dictionary or instance of ...``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from runtime import ConfigError, parse_yaml

ROLE = "roles:\n  w:\n"


@pytest.mark.parametrize(
    ("text", "where", "said"),
    [
        (ROLE + "\tdescription: W\n", (3, 1), "a tab, where YAML takes spaces only"),
        (ROLE + "    description:\tW\n", (3, 17), "a tab, where YAML takes spaces only"),
        (
            "roles:\n  planner:\n    description: P\n   writer:\n    description: W\n",
            (4, 4),
            "this line is indented 3 spaces, as no key above it is (the keys beside it, "
            "from line 2, are indented 2): indent it as the keys beside it",
        ),
        (
            ROLE + "    description: P\n      max_turns: 2\n",
            (4, 16),
            "this line is indented deeper than line 3, so it is read as the rest of that "
            "line's value: indent it as the keys beside it, or line 3 as this one if that is "
            "the line out of place",
        ),
        (
            "roles:\n  planner\n  writer:\n    description: W\n",
            (3, 9),
            "line 2 has no ':' after its key, so this line is read as the rest of it",
        ),
        (
            ROLE + "    description: Plans: the task\n",
            (3, 23),
            "the value holds ': ', which YAML reads as a key: put the whole value in quotes",
        ),
        (
            ROLE + "    instructions: {city} is the place\n",
            (3, 26),
            "the value begins with '{', which YAML reads as a mapping that ends with '}', "
            "and goes on after it: put the whole value in quotes",
        ),
        (
            ROLE + "    description: 'it's fine'\n",
            (3, 22),
            "goes on after it: put the whole value in quotes (a quote inside a quoted text "
            "is written twice: 'it''s')",
        ),
        (
            ROLE + "    instructions: *Always* cite\n",
            (3, 26),
            "a value that begins with '*' is an alias of an anchor (&name): put the whole "
            "value in quotes",
        ),
        (ROLE + "    instructions: @team first\n", (3, 19), "a value cannot begin with '@'"),
        (
            ROLE + "    tools:\n      - a\n    - b\n",
            (5, 5),
            "a list item ('- ') is indented as the keys of line 3: indent it under the key",
        ),
        ("a: 1\n---\nb: 2\n", (2, 1), "a second document ('---') in the file"),
        ("a: [x\nb: c\n", (2, 2), "the list begun with '[' on line 1 is not closed"),
        ("a: 1\r  b: 2\n", (2, 4), "this line is indented deeper than line 1"),  # \r breaks
        (ROLE + "    instructions: - do this\n", (3, 19), "a value that begins with '- '"),
        (ROLE + "    instructions: ? why\n", (3, 19), "a value that begins with '? '"),
        (
            ROLE + "    instructions: |\n    text\n",  # at the key's indent: not its text
            (4, 5),  # the line read as a key, not past the end of the file
            "this line is read as a key, and no ':' follows it: write 'key: value' (the "
            "lines of a text under 'key: |' are indented deeper than its key)",
        ),
        ("a: 1\nb\nc: 2\n", (2, 1), "this line is read as a key, and no ':' follows it"),
        (
            "roles:\n  a: &base {max_turns: 2}\n  b: &base\n    max_turns: 3\n  c: *base\n",
            (3, 6),
            "a second anchor of the name of the one on line 2 (&name: YAML takes each name "
            "once): give this one a name of its own, and its aliases (*name) with it",
        ),
    ],
)
def test_a_yaml_mistake_says_what_to_write_instead(
    text: str, where: tuple[int, int], said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="h.yaml")
    assert (caught.value.line, caught.value.column) == where
    message = caught.value.message
    assert message.startswith("invalid YAML: ")
    assert said in message


class Retry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    attempts: int = 1
    deadline_s: float = 1.0


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    unknown_field_hint: ClassVar[str] = "a parameter goes under settings: {{{name}: ...}}"
    shorthand: ClassVar[str] = "a name"
    model: str = ""
    settings: dict[str, Any] = {}
    retry: Retry = Retry()


class Root(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = ""
    tools: tuple[str, ...] = ()
    roles: dict[str, Any] = {}
    failure: Literal["fail_fast", "best_effort"] = "fail_fast"
    endpoint: Endpoint | None = None
    name: str = Field(default="w", pattern=r"^[A-Za-z0-9_-]{1,64}$")  # a role's
    namespace: str = Field(default="n", pattern=r"^[\w.:/@-]+$")  # a memory's
    case: str = Field(default="c", pattern=r"^[^\s/]+$")  # an eval case's id


def told(text: str) -> str:
    doc = parse_yaml(text, file="h.yaml")
    _, errors = doc.validate(Root, doc.data)
    [error] = errors
    return str(error)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "description: no\n",
            "h.yaml:1:1: description: Input should be a valid string (got False): YAML reads "
            "yes, no, on, off, true and false as booleans; write the text in quotes",
        ),
        (
            "description: 42\n",
            "h.yaml:1:1: description: Input should be a valid string (got 42): write it in "
            "quotes, as text",
        ),
        (
            "tools: tools:count\n",
            "h.yaml:1:1: tools: should be a list (got 'tools:count'): write it in brackets "
            "([a, b]), or as '- item' lines",
        ),
        (
            "roles:\n  - name: planner\n  - name: writer\n",
            "h.yaml:1:1: roles: should be a mapping (got [{'name': 'planner'}, {'name': "
            "'writer'}]): write each item as 'NAME:' with its other fields indented under "
            "it, in place of '- name: NAME'",
        ),
        (
            "endpoint: {retry: 3}\n",
            "h.yaml:1:12: endpoint.retry: should be a mapping of attempts, deadline_s (got "
            "3): write its fields under it, one 'field: value' a line",
        ),
        (
            "endpoint: {settings: [a]}\n",
            "h.yaml:1:12: endpoint.settings: should be a mapping (got ['a']): write 'key: "
            "value' lines under it, without '- '",
        ),
        (
            "endpoint: [a]\n",
            "h.yaml:1:1: endpoint: should be a mapping of model, retry, settings, or a name "
            "(got ['a'])",
        ),
        (
            "failure: besteffort\n",
            "h.yaml:1:1: failure: Input should be 'fail_fast' or 'best_effort' (got "
            "'besteffort') (did you mean 'best_effort'?)",
        ),
        (
            "endpoint: {temperature: 0.2}\n",
            "h.yaml:1:12: endpoint.temperature: unknown field 'temperature' (a parameter goes "
            "under settings: {temperature: ...}); allowed: model, retry, settings",
        ),
        # A pattern is said in words, not as the regular expression it is.
        (
            "name: my worker\n",
            "h.yaml:1:1: name: should be 1 to 64 characters: letters, digits, '_' or '-' "
            "(got 'my worker')",
        ),
        (
            "namespace: my notes\n",
            "h.yaml:1:1: namespace: should hold only letters, digits, '_', '.', ':', '/', '@' "
            "or '-' (got 'my notes')",
        ),
        ("case: a/b\n", "h.yaml:1:1: case: should hold no spaces or '/' (got 'a/b')"),
        # A key with nothing after it has no value, not Python's None.
        (
            "description:\n",
            "h.yaml:1:1: description: Input should be a valid string (got no value)",
        ),
    ],
)
def test_a_value_of_the_wrong_shape_says_what_to_write_instead(text: str, said: str) -> None:
    assert told(text) == said


def test_a_key_is_a_name_as_it_is_written() -> None:
    # 'yes:' and 'on:' were both the key 'True', so two roles so named were refused as
    # "key 'True' appears twice", a name the file never wrote.
    doc = parse_yaml("roles:\n  yes: {}\n  on: {}\n  null: {}\n  1.50: {}\n  2: {}\n")
    assert list(doc.data["roles"]) == ["yes", "on", "null", "1.50", 2]
    assert doc.locate(("roles", "on")) == (3, 3)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("roles:\n\u00a0\u00a0planner:\n    description: P\n", (2, 1)),  # in an indentation
        (ROLE + "    description:\u00a0Writes.\n", (3, 17)),  # after a key's colon
        ("tools:\n  -\u00a0tools:count\n", (2, 4)),  # after a list item's dash
        ("a: 1\r\n\u3000b: 2\r\n", (2, 1)),  # an ideographic space, CRLF lines
    ],
)
def test_a_space_yaml_does_not_take_for_one_is_told_where_it_is(
    text: str, where: tuple[int, int]
) -> None:
    # A non-breaking space (a page copied from a browser holds them) parsed: the key
    # took it in ('\xa0\xa0planner', so roles: was empty), or the value swallowed the
    # key ('description:\xa0Writes.'), and the errors named neither.
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="h.yaml")
    assert (caught.value.line, caught.value.column) == where
    what = (
        "a U+3000 space"
        if "\u3000" in text
        else ("a non-breaking space (U+00A0, as text copied from a web page holds)")
    )
    assert caught.value.message == (
        f"invalid YAML: {what}, where YAML takes plain spaces only: write a space in its place"
    )


def test_a_non_breaking_space_inside_a_text_is_kept() -> None:
    text = "a: 10\u00a0km\nb: 'x:\u00a0y'\nc: [p:\u00a0q]\n"
    assert parse_yaml(text).data == {"a": "10\u00a0km", "b": "x:\u00a0y", "c": ["p:\u00a0q"]}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("roles:\n  w: !role {description: W}\n", "h.yaml:2:6: roles.w: a YAML tag (!role) on a "
         "mapping means nothing here: remove it"),
        ("w: !!python/object:os.system {a: 1}\n", "h.yaml:1:4: w: a YAML tag "
         "(!!python/object:os.system) on a mapping means nothing here: remove it"),
        ("tools: !!set [a]\n", "h.yaml:1:8: tools: a YAML tag (!!set) on a list means nothing "
         "here: remove it"),
    ],
)  # fmt: skip
def test_a_tag_on_a_mapping_or_a_list_is_told_not_dropped(text: str, said: str) -> None:
    # It was dropped without a word: the mapping read as if untagged.
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="h.yaml")
    assert str(caught.value) == said


def test_a_mapping_or_a_list_tagged_as_what_it_is_reads_as_one() -> None:
    doc = parse_yaml("a: !!map {b: 1}\nc: !!seq [1]\n")
    assert doc.data == {"a": {"b": 1}, "c": [1]}


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: int
    turns: int = 1


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # One mistake, told once: the field meant was not "also required".
        (
            "budget: {tokns: 3}\n",
            ["h.yaml:1:10: budget.tokns: unknown field 'tokns' (did you mean 'tokens'?); "
             "allowed: tokens, turns"],
        ),
        # A field left out and another written that is not it: both told.
        (
            "budget: {turn: 3}\n",
            ["h.yaml:1:1: budget.tokens: this field is required",
             "h.yaml:1:10: budget.turn: unknown field 'turn' (did you mean 'turns'?); "
             "allowed: tokens, turns"],
        ),
    ],
)  # fmt: skip
def test_a_required_field_misspelt_is_one_mistake(text: str, said: list[str]) -> None:
    doc = parse_yaml(text, file="h.yaml")
    _, errors = doc.validate(Budgeted, doc.data)
    assert [str(e) for e in errors] == said


class Budgeted(BaseModel):
    model_config = ConfigDict(extra="forbid")
    budget: Budget | None = None
