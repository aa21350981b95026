"""Rendering a tool's result as observation text: bounded, and never raising."""

from __future__ import annotations

import itertools
from typing import Any

from runtime.tools.render import render


def test_a_structure_cut_short_says_so_without_a_total() -> None:
    text = render({"xs": list(range(1000))}, 100)
    shown, marker = text.rsplit("\n", 1)
    assert shown == '{"xs":[' + ",".join(str(i) for i in range(100))[:93]
    assert marker == "[... output cut at 100 characters; the rest not shown]"


def test_a_value_within_the_limit_is_not_cut() -> None:
    assert render([1, 2, 3], 100) == "[1,2,3]"
    assert render((x for x in "ab"), 100) == '["a","b"]'


def test_endless_iterators_nested_anywhere_are_read_only_as_far_as_shown() -> None:
    text = render({"a": [itertools.count()], "b": itertools.repeat("z")}, 200)
    assert text.startswith('{"a":[[0,1,2,')
    assert text.endswith("[... output cut at 200 characters; the rest not shown]")


def test_a_cycle_is_unrolled_only_as_far_as_shown_or_else_shown_by_repr() -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    shallow = render({"k": looped}, 100)
    assert shallow.startswith('{"k":[1,[1,[1,')
    assert shallow.endswith("[... output cut at 100 characters; the rest not shown]")
    # Deeper than Python recurses: the structure is given up for its repr().
    assert render({"k": looped}, 20_000) == "{'k': [1, [...]]}"
