"""``record`` makes the same classes ``dataclass(slots=True, ...)`` makes, with shared
equality, hash and repr: each class here is checked against its dataclass twin."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

import honeycomb.run.events
import runtime.events
from runtime import DispatchPolicy, Limits, ModelCallStarted, ToolCall, Usage
from runtime._values import record


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    label: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PointTwin:
    x: int
    y: int = 0
    label: str = field(default="", compare=False, repr=False)


@record(kw_only=True)
class Note:
    text: str
    tags: list[str] = field(default_factory=list)


@dataclass(kw_only=True, slots=True)
class NoteTwin:
    text: str
    tags: list[str] = field(default_factory=list)


@record(frozen=True)
class Empty:
    pass


@record()
class Node:
    name: str
    children: list[Any] = field(default_factory=list)


def _as_twin(text: str) -> str:
    return text.replace("Twin", "")


def _described(value: Any) -> list[tuple[object, ...]]:
    return [(f.name, f.compare, f.repr, f.hash, f.kw_only) for f in dataclasses.fields(value)]


@pytest.mark.parametrize(
    ("make", "twin"),
    [
        (lambda: Point(1, 2, "a"), lambda: PointTwin(1, 2, "a")),
        (lambda: Point(1), lambda: PointTwin(1)),
        (lambda: Note(text="hi", tags=["x"]), lambda: NoteTwin(text="hi", tags=["x"])),
    ],
)
def test_a_record_reads_equals_and_hashes_as_its_dataclass_twin(make: Any, twin: Any) -> None:
    a, b, t = make(), make(), twin()
    assert repr(a) == _as_twin(repr(t))
    assert a == b
    assert (a != b) is False
    assert (a.__hash__ is None) == (t.__hash__ is None)
    if a.__hash__ is not None:
        assert hash(a) == hash(b) == hash(t)
    assert type(a).__dataclass_params__.frozen == type(t).__dataclass_params__.frozen
    assert _described(a) == _described(t)
    assert type(a).__slots__ == type(t).__slots__


def test_fields_left_out_of_comparison_are_left_out_of_equality_hash_and_repr() -> None:
    assert Point(1, 2, "a") == Point(1, 2, "b")
    assert hash(Point(1, 2, "a")) == hash(Point(1, 2, "b"))
    assert Point(1, 2) != Point(1, 3)
    assert "label" not in repr(Point(1))


def test_records_of_different_classes_never_equal() -> None:
    assert Point(1, 2) != PointTwin(1, 2)
    assert Point(1, 2).__eq__(PointTwin(1, 2)) is NotImplemented
    assert Note(text="a") != "a"


def test_a_frozen_record_refuses_assignment_and_a_mutable_one_is_unhashable() -> None:
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
        del point.y  # type: ignore[misc]
    assert (point.x, point.y) == (1, 0)
    with pytest.raises(TypeError, match="unhashable"):
        hash(Note(text="a"))


@record(frozen=True)
class Reading:
    value: float


def test_one_field_compares_as_a_dataclass_compares_it() -> None:
    reading = Reading(float("nan"))
    assert reading == reading  # a tuple of the same object, as the dataclass compares
    assert hash(Reading(2.5)) == hash((2.5,))


def test_a_frozen_record_can_be_subclassed_by_a_frozen_dataclass() -> None:
    @dataclass(frozen=True)
    class Labelled(Point):
        note: str = ""

    labelled = Labelled(1, 2, note="n")
    assert labelled == Labelled(1, 2, note="n")
    with pytest.raises(dataclasses.FrozenInstanceError):
        labelled.note = "m"  # type: ignore[misc]


def test_a_frozen_record_that_writes_its_own_equality_keeps_a_hash() -> None:
    @record(frozen=True)
    class Caseless:
        name: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Caseless) and self.name.lower() == other.name.lower()

    assert Caseless("A") == Caseless("a")
    assert hash(Caseless("A")) == hash(("A",))


def _pickled(protocol: int) -> Any:
    return lambda value: pickle.loads(pickle.dumps(value, protocol=protocol))


@pytest.mark.parametrize(
    "copier",
    [copy.copy, copy.deepcopy, *(_pickled(p) for p in range(pickle.HIGHEST_PROTOCOL + 1))],
)
def test_a_frozen_record_copies_and_pickles_as_its_twin_does(copier: Any) -> None:
    point = Point(1, 2, "a")
    copied = copier(point)
    assert copied == point
    assert copied.label == "a"
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.x = 3  # type: ignore[misc]
    assert dataclasses.replace(point, y=5) == Point(1, 5)


def test_a_record_without_fields_equals_its_kind_only() -> None:
    assert Empty() == Empty()
    assert hash(Empty()) == hash(Empty())
    assert repr(Empty()) == "Empty()"


def test_a_record_that_holds_itself_has_a_finite_repr() -> None:
    node = Node("a")
    node.children.append(node)
    assert repr(node) == "Node(name='a', children=[...])"


def test_methods_a_class_writes_itself_are_kept() -> None:
    @record(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

    assert repr(Named("x")) == "<x>"
    assert Named("x") == Named("x")


def _records() -> list[type]:
    modules = (runtime.events, honeycomb.run.events)
    events = [v for m in modules for v in vars(m).values()
              if isinstance(v, type) and issubclass(v, runtime.events.Event)]  # fmt: skip
    return [*events, Limits, DispatchPolicy, ToolCall, Usage]


@pytest.mark.parametrize("cls", _records(), ids=lambda c: c.__name__)
def test_honeycomb_s_events_settings_and_values_are_records(cls: type) -> None:
    """Each compiles only what it must; equality, hash and repr are the shared ones."""
    assert vars(cls)["__repr__"] is vars(Point)["__repr__"]
    assert vars(cls)["__eq__"] is vars(Point)["__eq__"]
    assert dataclasses.is_dataclass(cls)
    assert "__slots__" in vars(cls)


def test_an_event_s_repr_and_equality_name_its_fields() -> None:
    event = ModelCallStarted(run_id="r", worker="w", turn=1)
    assert repr(event) == "ModelCallStarted(worker='w', run_id='r', turn=1)"
    assert event == dataclasses.replace(event)
    assert event != dataclasses.replace(event, turn=2)
