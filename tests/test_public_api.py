"""The public surface: ``honeycomb`` and the namespaces docs/api.md lists. Each
module's ``__all__`` is its one list of names; these tests hold it to the code and to
the page, and check that every type a public signature names is public too."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

import honeycomb
from honeycomb.errors import HoneycombError
from honeycomb.events import Event
from tests.support import ROOT
from tests.support.api_page import (
    bound_on_import,
    documented_names,
    moved_names,
    public_modules,
)

OURS = ("runtime", "workers", "honeycomb")
TOP_AT_MOST = 90

PUBLIC = public_modules()


def module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def test_the_page_documents_honeycomb_and_its_namespaces() -> None:
    assert {"honeycomb", "honeycomb.events", "honeycomb.errors", "honeycomb.testing"} <= set(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_says_what_it_holds_and_lists_each_name_once(name: str) -> None:
    found = module(name)
    assert (found.__doc__ or "").strip(), f"{name} has no docstring"
    assert len(found.__all__) == len(set(found.__all__)), f"{name}.__all__ repeats a name"


@pytest.mark.parametrize("name", PUBLIC)
def test_every_name_of_a_public_module_is_there_and_is_no_module(name: str) -> None:
    found = module(name)
    for each in found.__all__:
        assert not each.startswith("_"), f"{name}.{each}"
        value = getattr(found, each)
        assert not isinstance(value, types.ModuleType), f"{name}.{each} is a module"


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_binds_no_public_name_but_those_of_its_all(name: str) -> None:
    """As httpx's test of its exported members: what an IDE offers after
    ``honeycomb.`` is ``__all__`` (and the subpackages), not ``TYPE_CHECKING`` or a
    helper the module happened to import."""
    bound = {
        each
        for each, value in vars(module(name)).items()
        if not each.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(bound - set(module(name).__all__)) == []


@pytest.mark.parametrize("name", PUBLIC)
def test_every_name_of_a_public_module_is_on_the_api_page(name: str) -> None:
    rows = documented_names(name)
    assert len(rows) == len(set(rows))
    assert sorted(rows) == sorted(module(name).__all__)


def test_honeycomb_holds_what_ordinary_code_writes_and_no_more() -> None:
    assert len(honeycomb.__all__) <= TOP_AT_MOST


def test_where_names_went_names_each_moved_name_where_it_is_now() -> None:
    moved = moved_names()
    assert moved, "the page has no table of where names went"
    names = [name for names in moved.values() for name in names]
    assert len(names) == len(set(names))
    assert sorted(set(names) & set(honeycomb.__all__)) == []
    for namespace, taken in moved.items():
        assert sorted(set(taken) - set(module(namespace).__all__)) == [], namespace


CHECKING = r"(typing\.)?TYPE_CHECKING"


def checking_imports(name: str) -> dict[str, tuple[str, str]]:
    """What a module imports only for type checkers (``if TYPE_CHECKING:``): each
    name bound, with its module and its name there."""
    found: dict[str, tuple[str, str]] = {}
    tree = ast.parse(inspect.getsource(sys.modules[name]))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and re.fullmatch(
            r"(typing\.)?TYPE_CHECKING", ast.unparse(node.test)
        ):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        found[alias.asname or alias.name] = (statement.module, alias.name)
    return found


@pytest.mark.parametrize("name", PUBLIC)
def test_the_names_that_load_on_first_use_are_the_ones_type_checkers_import(
    name: str,
) -> None:
    """A name not bound as its module is imported loads on first use: type checkers
    must see it imported under ``TYPE_CHECKING``, and nothing else may be there."""
    found = module(name)
    later = sorted(set(found.__all__) - bound_on_import()[name])
    assert later == sorted(checking_imports(name))
    for each in later:
        where, what = checking_imports(name)[each]
        assert getattr(found, each) is getattr(importlib.import_module(where), what)


def getattr_seen_by_type_checkers(source: str) -> list[int]:
    """The lines of a module's top level that bind ``__getattr__`` where type checkers
    see it (anywhere but under ``if not TYPE_CHECKING:``)."""
    seen = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and re.fullmatch(f"not {CHECKING}", ast.unparse(node.test)):
            continue
        for inner in ast.walk(node):
            names = []
            if isinstance(inner, ast.Assign):
                names = [t.id for t in inner.targets if isinstance(t, ast.Name)]
            elif isinstance(inner, ast.FunctionDef):
                names = [inner.name]
            if "__getattr__" in names:
                seen.append(inner.lineno)
    return seen


@pytest.mark.parametrize("name", PUBLIC)
def test_type_checkers_see_no_getattr_in_a_public_module(name: str) -> None:
    """A module ``__getattr__`` makes mypy and IDEs take every attribute for one that
    exists: ``from honeycomb import Executer`` would pass ``mypy --strict``."""
    assert getattr_seen_by_type_checkers(inspect.getsource(module(name))) == []


@pytest.mark.parametrize(
    ("source", "seen"),
    [
        ("__getattr__ = lazy_names(__name__, globals(), ())", [1]),
        ("if TYPE_CHECKING:\n    pass\nelse:\n    def __getattr__(name): ...", [4]),
        ("if not TYPE_CHECKING:\n    __getattr__ = lazy_names(__name__, globals(), ())", []),
        ("if not typing.TYPE_CHECKING:\n    def __getattr__(name): ...", []),
    ],
)
def test_a_getattr_type_checkers_see_is_found(source: str, seen: list[int]) -> None:
    assert getattr_seen_by_type_checkers(source) == seen


def classes_of(package: str, base: type) -> set[type]:
    """Every public subclass of ``base`` that a public module of ours defines."""
    found: set[type] = set()
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if any(part.startswith("_") and part != "__init__" for part in parts):
            continue
        if parts[-1] == "__main__":
            continue
        name = ".".join(p for p in parts if p != "__init__")
        for value in vars(importlib.import_module(name)).values():
            if (
                isinstance(value, type)
                and issubclass(value, base)
                and value.__module__ == name
                and not value.__name__.startswith("_")
            ):
                found.add(value)
    return found


def test_the_errors_namespace_holds_every_error() -> None:
    errors = {c for package in OURS for c in classes_of(package, HoneycombError)}
    exported = vars(module("honeycomb.errors")).values()
    missing = sorted(c.__name__ for c in errors if c not in exported)
    assert missing == []


def test_the_events_namespace_holds_every_event() -> None:
    events = {c for package in OURS for c in classes_of(package, Event)}
    exported = vars(module("honeycomb.events")).values()
    missing = sorted(c.__name__ for c in events if c not in exported)
    assert missing == []


# --- what public signatures name ---------------------------------------------------

OUTSIDE = {"pydantic", "pydantic_core", "msgspec", "openai", "opentelemetry", "rich",
           "tenacity", "typing_extensions"}  # fmt: skip
"""Libraries whose types a public signature may name: the values users bring (a
pydantic model, an ``openai`` client, an OpenTelemetry provider) or get back (a
``rich`` renderable). Not ``anyio``: Honeycomb runs on asyncio, and a program should
not need anyio's types to call it."""


@cache
def public_values() -> dict[int, str]:
    """Every value the public modules export, by identity, with its public name."""
    return {
        id(getattr(module(name), each)): f"{name}.{each}"
        for name in reversed(PUBLIC)
        for each in module(name).__all__
    }


@cache
def namespace_of(name: str) -> dict[str, Any]:
    """What an annotation in module ``name`` can name: its globals, and what it imports
    only for type checkers."""
    space = dict(vars(importlib.import_module(name)))
    for alias, (where, what) in checking_imports(name).items():
        space.setdefault(alias, getattr(importlib.import_module(where), what))
    return space


def annotations_of(value: object, label: str) -> Iterator[tuple[str, str, object]]:
    """``(where, module, annotation)`` for every annotation of a public function, or of
    a public class: its fields, and the parameters and returns of its public methods,
    its properties, and its constructor (inherited ones included); a public alias
    (``SubtaskSpec``) is an annotation itself."""
    if isinstance(value, type):
        for base in value.__mro__:
            if base.__module__.split(".")[0] not in OURS:
                continue
            for field, annotation in vars(base).get("__annotations__", {}).items():
                if not field.startswith("_"):
                    yield f"{label}.{field}", base.__module__, annotation
            for attr, member in vars(base).items():
                if attr.startswith("_") and attr not in ("__init__", "__call__"):
                    continue
                if isinstance(member, property):
                    member = member.fget
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isfunction(member):
                    yield from annotations_of(member, f"{label}.{attr}")
    elif inspect.isfunction(value):
        for parameter, annotation in value.__annotations__.items():
            yield f"{label}({parameter})", value.__module__, annotation
    elif typing.get_origin(value) is not None or isinstance(value, types.UnionType):
        yield label, "typing", value


def named_in(annotation: object, module_name: str) -> Iterator[object]:
    """What an annotation names: each name (or dotted name) written in it, evaluated
    where it was written (our own code: ``eval`` of our annotations is what
    ``typing.get_type_hints`` does), and every class it resolves to, through aliases."""
    space = namespace_of(module_name)
    if isinstance(annotation, str):
        for node in written_names(ast.parse(annotation, mode="eval").body):
            yield eval(ast.unparse(node), space)
        annotation = eval(annotation, space)
    yield from classes_in(annotation, space)


def written_names(node: ast.expr) -> Iterator[ast.expr]:
    """The names and dotted names an annotation's text is made of, but not those of
    ``Annotated``'s metadata (validators, field descriptions)."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        yield node
        return
    if isinstance(node, ast.Subscript):
        yield from written_names(node.value)
        arguments = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if ast.unparse(node.value).endswith("Annotated"):
            arguments = arguments[:1]
        for argument in arguments:
            yield from written_names(argument)
    elif isinstance(node, ast.BinOp):
        yield from written_names(node.left)
        yield from written_names(node.right)
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from written_names(element)


def classes_in(hint: object, space: dict[str, Any]) -> Iterator[object]:
    if isinstance(hint, typing.ForwardRef):
        hint = eval(hint.__forward_arg__, space)
    if isinstance(hint, typing.TypeVar):
        if hint.__bound__ is not None:
            yield from classes_in(hint.__bound__, space)
        return
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return
    if origin is typing.Annotated:
        yield from classes_in(typing.get_args(hint)[0], space)
        return
    if origin is not None:
        yield origin
        for argument in typing.get_args(hint):
            for each in argument if isinstance(argument, list) else [argument]:
                yield from classes_in(each, space)
    elif isinstance(hint, type):
        yield hint


TYPE_VARIABLES = (typing.TypeVar, typing.ParamSpec, typing.ParamSpecArgs, typing.ParamSpecKwargs)


def is_public(value: object) -> bool:
    """Whether a program can import ``value`` from a public module of ours, Python or a
    library of :data:`OUTSIDE` (a module named on the way to a type, ``anyio`` of
    ``anyio.Lock``, is judged by that type)."""
    if id(value) in public_values() or isinstance(value, (types.ModuleType, *TYPE_VARIABLES)):
        return True
    where = getattr(value, "__module__", None)
    if where is None or (where == "typing" and not isinstance(value, type)):
        return True  # a form of typing's: Any, Literal, Self, Callable ...
    top = where.split(".")[0]
    if top in OURS:
        return False
    return top in sys.stdlib_module_names or top == "builtins" or top in OUTSIDE


def not_public(name: str) -> Iterator[str]:
    """Each type a public name's signatures need that is not public, with where."""
    value = getattr(module(name.rpartition(".")[0]), name.rpartition(".")[2])
    for where, written_in, annotation in annotations_of(value, name):
        for named in named_in(annotation, written_in):
            if not is_public(named):
                shown = getattr(named, "__qualname__", repr(named))
                yield f"{where}: {getattr(named, '__module__', '?')}.{shown}"


def public_names() -> list[str]:
    return sorted({f"{name}.{each}" for name in PUBLIC for each in module(name).__all__})


def test_every_type_a_public_signature_names_is_public() -> None:
    """A program can import every type it needs to call Honeycomb and to annotate
    what it gets back: each class, protocol and alias a public function, class field,
    method, property or constructor names is exported by ``honeycomb`` or one of its
    namespaces (or comes from Python or a library the program brings)."""
    leaks = sorted({leak for name in public_names() for leak in not_public(name)})
    assert leaks == []
