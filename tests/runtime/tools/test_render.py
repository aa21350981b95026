"""Rendering a tool's result as observation text: bounded, and never raising."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator
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


def test_deep_nesting_rendered_leaves_stack_for_what_runs_meanwhile() -> None:
    """Rendering went down nested containers (a cycle, an iterator nesting without end)
    to Python's recursion limit, and gave up there: a finalizer the garbage collector
    ran meanwhile had no stack left, and failed."""
    ran: list[bool] = []

    def nest(depth: int) -> int:
        return depth if depth == 0 else nest(depth - 1)

    class Finalized:
        def __del__(self) -> None:
            try:
                nest(200)  # a finalizer's own few calls (a log entry, a close)
                ran.append(True)
            except RecursionError:
                ran.append(False)

    def without_end() -> Iterator[Any]:
        garbage = [Finalized()]
        garbage.append(garbage)  # collected by the garbage collector, at this depth
        del garbage
        yield 1
        yield without_end()

    threshold = gc.get_threshold()
    gc.set_threshold(1)  # a collection at (nearly) every allocation
    try:
        text = render({"k": without_end()}, 20_000)
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    assert text.startswith("{'k': <generator object")
    assert ran
    assert all(ran), f"{ran.count(False)} of {len(ran)} finalizers ran out of stack"


def test_a_cycle_is_unrolled_only_as_far_as_shown_or_else_shown_by_repr() -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    shallow = render({"k": looped}, 100)
    assert shallow.startswith('{"k":[1,[1,[1,')
    assert shallow.endswith("[... output cut at 100 characters; the rest not shown]")
    # Deeper than Python recurses: the structure is given up for its repr().
    assert render({"k": looped}, 20_000) == "{'k': [1, [...]]}"
