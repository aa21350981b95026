"""Hive-style YAML validated into pydantic models: every error points at its line and
field, and an unknown field lists every field allowed there; a YAML mistake is located
at the line where it is."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, BeforeValidator, ConfigDict

from runtime import ConfigError, parse_yaml


class Leaf(BaseModel):
    model_config = ConfigDict(extra="forbid")
    alpha: int = 0
    beta: int = 0
    gamma: int = 0


class Other(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["other"]
    delta: int = 0


def _same(value: Any) -> Any:
    return value


class Root(BaseModel):
    model_config = ConfigDict(extra="forbid")
    optional: Leaf | None = None
    mapping: dict[str, Leaf] = {}
    items: list[Leaf] = []
    tupled: tuple[Leaf, ...] = ()
    pair: tuple[int, Leaf] | None = None
    shorthand: Annotated[Leaf, BeforeValidator(_same)] = Leaf()
    leaf_or_name: Leaf | str = ""
    tagged: Annotated[Leaf | Other, BeforeValidator(_same)] | None = None
    nested: list[dict[str, Leaf]] = []


LEAF = "alpha, beta, gamma"


@pytest.mark.parametrize(
    ("text", "where", "allowed"),
    [
        ("optional: {alpha: 1, zeta: 2}", "1:22: optional.zeta", LEAF),
        ("mapping: {a: {alpha: 1, zeta: 2}}", "1:25: mapping.a.zeta", LEAF),
        ("items: [{alpha: 1, zeta: 2}]", "1:20: items[0].zeta", LEAF),
        ("tupled: [{alpha: 1, zeta: 2}]", "1:21: tupled[0].zeta", LEAF),
        ("pair: [1, {zeta: 2}]", "1:12: pair[1].zeta", LEAF),
        ("shorthand: {alpha: 1, zeta: 2}", "1:23: shorthand.zeta", LEAF),
        ("leaf_or_name: {alpha: 1, zeta: 2}", "1:26: leaf_or_name.zeta", LEAF),
        ("tagged: {kind: other, zeta: 2}", "1:23: tagged.zeta", "delta, kind"),
        ("nested: [{a: {alpha: 1, zeta: 2}}]", "1:25: nested[0].a.zeta", LEAF),
    ],
)
def test_an_unknown_field_is_located_and_lists_every_field_allowed_there(
    text: str, where: str, allowed: str
) -> None:
    doc = parse_yaml(text, file="h.yaml")
    _, errors = doc.validate(Root, doc.data)
    unknown = [str(e) for e in errors if "unknown field 'zeta'" in str(e)]
    assert unknown
    assert f"h.yaml:{where}: unknown field 'zeta'" in unknown[-1]
    assert unknown[-1].endswith(f"; allowed: {allowed}")


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (
            "name: t\nroles:\n  planner:\n    description: [unclosed\n",
            (4, 18),
            "the file ends inside a flow sequence begun here "
            "(expected ',' or ']', but got '<stream end>')",
        ),
        ("a: {x: 1\n\n# more\n", (1, 4), "the file ends inside a flow mapping begun here"),
        ('a: 1\nb: "open\nc: d\n', (2, 4), "the file ends inside a quoted scalar begun here"),
        ("a: [x\nb: c\n", (2, 2), "the list begun with '[' on line 1 is not closed"),
    ],
)
def test_a_yaml_mistake_is_located_where_it_is_not_past_the_end(
    text: str, where: tuple[int, int], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text, file="h.yaml")
    assert (caught.value.line, caught.value.column) == where
    assert caught.value.message.startswith(f"invalid YAML: {message}")
