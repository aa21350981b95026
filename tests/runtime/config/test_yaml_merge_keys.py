"""YAML merge keys (``<<: *base``) as YAML's merge type says: a key the mapping writes
overrides a merged one, the first of several merged mappings that has a key gives it,
and a key the mapping itself writes twice is still an error."""

from __future__ import annotations

import pytest

from runtime import ConfigError, parse_yaml


def test_a_key_the_mapping_writes_overrides_the_merged_one() -> None:
    doc = parse_yaml(
        "planner: &base\n  description: plans\n  max_turns: 2\n"
        "worker:\n  <<: *base\n  description: works\n",
        file="h.yaml",
    )
    assert doc.data["worker"] == {"description": "works", "max_turns": 2}
    assert doc.data["planner"] == {"description": "plans", "max_turns": 2}
    assert doc.locate(("worker", "description")) == (6, 3)  # where it is written
    assert doc.locate(("worker", "max_turns")) == (3, 3)  # where it is merged from


def test_of_several_mappings_merged_the_first_that_has_a_key_gives_it() -> None:
    doc = parse_yaml("a: &a {x: 1}\nb: &b {x: 2, y: 2}\nc: {<<: [*a, *b], z: 3}\n")
    assert doc.data["c"] == {"x": 1, "y": 2, "z": 3}


def test_a_key_written_twice_beside_a_merge_is_still_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml("a: &a {x: 1}\nb:\n  <<: *a\n  x: 2\n  x: 3\n", file="h.yaml")
    assert str(caught.value) == "h.yaml:5:3: b.x: key 'x' appears twice (first on line 4)"


def test_a_mapping_that_merges_reads_the_same_wherever_an_alias_puts_it() -> None:
    doc = parse_yaml("a: &a {x: 1, y: 1}\nb: &b {<<: *a, x: 2}\nc: *b\nd: {<<: *b, y: 3}\n")
    assert doc.data["b"] == doc.data["c"] == {"x": 2, "y": 1}
    assert doc.data["d"] == {"x": 2, "y": 3}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "a: &a 3\nb: {<<: *a}\n",
            "<string>:1:4: b: a merge key (<<) takes a mapping or a list of them",
        ),
        ("a: &a {<<: *a}\n", "<string>:1:4: a: an alias refers to its own anchor (a cycle)"),
    ],
)
def test_a_merge_of_no_mapping_or_of_itself_is_an_error(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_yaml(text)
    assert str(caught.value) == error


def test_merges_count_within_the_bound_on_values() -> None:
    # Each level merges the one before ten times over: 10**11 merges, were they made.
    lines = ["a0: &a0 {}"]
    lines += [f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 10)}]}}" for i in range(1, 12)]
    with pytest.raises(ConfigError, match="expands to more than 100,000 values"):
        parse_yaml("\n".join(lines))
