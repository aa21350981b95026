"""``@tool``, the schema it builds, argument parsing, and the ``ToolRegistry``."""

from __future__ import annotations

import enum
import json
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from runtime.errors import ConfigError, DuplicateToolError, ToolDefinitionError, UnknownToolError
from runtime.tools import ArgumentsError, Tool, ToolContext, ToolRegistry, tool
from tests.support import sample_tools

# Types used in signatures live at module level: with postponed annotations, the hints
# of a tool are resolved in its module's globals.


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Point(BaseModel):
    x: int
    y: int = 0


class Route(BaseModel):
    name: str
    stops: list[Point]


class Opaque:
    """Not a type pydantic can describe."""


def schema_of(t: Tool[Any, Any]) -> dict[str, Any]:
    return t.schema.parameters


# --- @tool on sync and async functions, bare and with options ------------------------


def test_bare_decorator_on_sync_function() -> None:
    @tool
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    assert isinstance(double, Tool)
    assert double.name == "double"
    assert double.description == "Double a number."
    assert not double.is_async
    assert not double.side_effects
    assert double.exclusive is None
    assert double.timeout is None
    assert not double.terminal
    assert double(4) == 8  # still callable as the plain function


async def test_bare_decorator_on_async_function() -> None:
    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        return f"page at {url}"

    assert fetch.is_async
    assert fetch.name == "fetch"
    assert await fetch(url="x") == "page at x"


def test_decorator_with_options() -> None:
    @tool(name="write-file", description="Write it.", side_effects=True, timeout=5, terminal=True)
    def write(path: str) -> str:
        """Docstring text that the description overrides."""
        return path

    assert write.name == "write-file"
    assert write.description == "Write it."
    assert write.side_effects
    assert write.timeout == 5
    assert write.terminal
    assert write.schema.name == "write-file"
    assert write.schema.description == "Write it."


async def test_async_decorator_with_options() -> None:
    @tool(timeout=1.5)
    async def ping() -> str:
        return "pong"

    assert ping.is_async
    assert ping.timeout == 1.5
    assert ping.description == ""
    assert await ping() == "pong"


def test_exclusive_implies_side_effects() -> None:
    @tool(exclusive="db")
    def migrate() -> None: ...

    assert migrate.exclusive == "db"
    assert migrate.side_effects
    assert "exclusive='db'" in repr(migrate)


def test_a_plain_parameterless_function_has_an_empty_object_schema() -> None:
    @tool
    def now() -> str:
        return "noon"

    assert schema_of(now) == {"type": "object", "properties": {}, "additionalProperties": False}
    assert now.parse_arguments("") == {}
    assert now.parse_arguments("  ") == {}
    assert now.parse_arguments("{}") == {}


# --- the schema -----------------------------------------------------------------------


def test_schema_from_type_hints_defaults_and_docstring() -> None:
    @tool
    def search(query: str, limit: int = 10, exact: bool = False) -> list[str]:
        """Search the index.

        Returns at most ``limit`` hits.

        Args:
            query: What to look for.
            limit (int): How many hits at most;
                more are dropped.

        Returns:
            The hits.
        """
        return []

    assert search.description == "Search the index.\n\nReturns at most ``limit`` hits."
    schema = schema_of(search)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["query"]
    assert schema["properties"] == {
        "query": {"type": "string", "description": "What to look for."},
        "limit": {
            "type": "integer",
            "default": 10,
            "description": "How many hits at most; more are dropped.",
        },
        "exact": {"type": "boolean", "default": False},
    }


def test_annotated_field_description_and_constraints() -> None:
    @tool
    def resize(
        width: Annotated[int, Field(description="Pixels wide.", ge=1)],
        height: Annotated[int, Field(description="Pixels high.")] = 100,
    ) -> str:
        """Resize the image."""
        return f"{width}x{height}"

    props = schema_of(resize)["properties"]
    assert props["width"] == {"type": "integer", "description": "Pixels wide.", "minimum": 1}
    assert props["height"] == {"type": "integer", "description": "Pixels high.", "default": 100}
    with pytest.raises(ArgumentsError, match="'width'"):
        resize.parse_arguments('{"width": 0}')


def test_annotated_description_wins_over_the_docstring() -> None:
    @tool
    def scale(factor: Annotated[float, Field(description="From Field.")], axis: str = "x") -> str:
        """Scale.

        Args:
            factor: From the docstring.
            axis: Which axis.
        """
        return ""

    props = schema_of(scale)["properties"]
    assert props["factor"]["description"] == "From Field."
    assert props["axis"]["description"] == "Which axis."


def test_an_args_line_indented_deeper_is_text_of_the_one_above() -> None:
    @tool
    def scale(factor: float, axis: str = "x") -> str:
        """Scale.

        Args:
            factor: How much, where
                default: 1 (no change).
            axis: Which axis.
        """
        return ""

    props = schema_of(scale)["properties"]
    assert props["factor"]["description"] == "How much, where default: 1 (no change)."
    assert props["axis"]["description"] == "Which axis."


def test_an_args_line_that_names_no_parameter_refuses_the_tool() -> None:
    # A typo (citty) or a parameter renamed since: its description reached no one, and
    # the argument the model saw had none.
    with pytest.raises(ToolDefinitionError) as caught:

        @tool
        def visit(city: str, month: int) -> str:
            """When to visit.

            Args:
                citty: The city's name.
                month: The month.
            """
            return ""

    assert str(caught.value) == (
        "cannot make tool 'visit': its docstring's Args: describes 'citty', which is no "
        "parameter of it (did you mean 'city'?); its parameters: city, month"
    )


def test_literal_and_enum() -> None:
    @tool
    def convert(
        value: float, unit: Unit = Unit.CELSIUS, mode: Literal["round", "floor"] = "round"
    ) -> str:
        return ""

    schema = schema_of(convert)
    assert schema["properties"]["mode"] == {
        "type": "string",
        "enum": ["round", "floor"],
        "default": "round",
    }
    assert schema["properties"]["unit"]["default"] == "celsius"
    unit_ref = schema["properties"]["unit"]["$ref"]
    assert schema["$defs"][unit_ref.rsplit("/", 1)[1]]["enum"] == ["celsius", "fahrenheit"]

    kwargs = convert.parse_arguments('{"value": 1.5, "unit": "fahrenheit", "mode": "floor"}')
    assert kwargs == {"value": 1.5, "unit": Unit.FAHRENHEIT, "mode": "floor"}
    with pytest.raises(ArgumentsError, match="'mode'"):
        convert.parse_arguments('{"value": 1, "mode": "ceil"}')
    with pytest.raises(ArgumentsError, match="'unit'"):
        convert.parse_arguments('{"value": 1, "unit": "kelvin"}')


def test_nested_models_and_lists() -> None:
    @tool
    def plan(route: Route, tags: list[str], weights: list[float] | None = None) -> str:
        return ""

    schema = schema_of(plan)
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert set(schema["$defs"]) == {"Route", "Point"}
    assert schema["$defs"]["Route"]["properties"]["stops"]["type"] == "array"
    assert schema["required"] == ["route", "tags"]

    kwargs = plan.parse_arguments(
        '{"route": {"name": "r", "stops": [{"x": 1}, {"x": 2, "y": 3}]}, "tags": ["a"]}'
    )
    assert kwargs["route"] == Route(name="r", stops=[Point(x=1), Point(x=2, y=3)])
    assert kwargs["tags"] == ["a"]
    assert kwargs["weights"] is None

    with pytest.raises(ArgumentsError) as info:
        plan.parse_arguments('{"route": {"name": "r", "stops": [{"x": 1}, {"y": 2}]}, "tags": []}')
    assert not info.value.not_json
    assert "'route.stops.1.x'" in info.value.detail


def test_tool_context_is_injected_and_absent_from_the_schema() -> None:
    @tool
    def whoami(ctx: ToolContext, greeting: str = "hi") -> str:
        return f"{greeting} {ctx.worker}"

    assert whoami.context_param == "ctx"
    schema = schema_of(whoami)
    assert set(schema["properties"]) == {"greeting"}
    assert "ToolContext" not in json.dumps(whoami.schema.parameters)
    # The model cannot pass it either.
    with pytest.raises(ArgumentsError, match="'ctx'"):
        whoami.parse_arguments('{"ctx": {"call_id": "x"}}')


async def test_tool_context_on_an_async_tool() -> None:
    @tool
    async def whoami(query: str, context: ToolContext) -> str:
        return context.call_id

    assert whoami.context_param == "context"
    assert set(schema_of(whoami)["properties"]) == {"query"}


# --- definition errors name the parameter -------------------------------------------


@pytest.mark.parametrize("bad_name", ["has space", "dots.not.allowed", "", "x" * 65, "ünï"])
def test_invalid_names_are_refused(bad_name: str) -> None:
    def f() -> None: ...

    with pytest.raises(ToolDefinitionError, match="names may use only") as info:
        tool(name=bad_name)(f)
    assert info.value.tool_name == bad_name


def test_a_lambda_needs_a_name() -> None:
    with pytest.raises(ToolDefinitionError, match="<lambda>"):
        tool(lambda: None)


def test_a_missing_type_hint_names_the_parameter() -> None:
    def greet(name: str, times) -> str:  # type: ignore[no-untyped-def]
        return name

    with pytest.raises(ToolDefinitionError, match="parameter 'times' has no type hint") as info:
        tool(greet)
    assert info.value.tool_name == "greet"


def test_star_args_name_the_parameter() -> None:
    def total(*numbers: int) -> int:
        return sum(numbers)

    with pytest.raises(ToolDefinitionError, match=r"parameter 'numbers': \*args"):
        tool(total)


def test_star_star_kwargs_name_the_parameter() -> None:
    def configure(name: str, **options: str) -> str:
        return name

    with pytest.raises(ToolDefinitionError, match="parameter 'options'"):
        tool(configure)


def test_an_undescribable_type_is_refused() -> None:
    def f(handle: Opaque) -> None: ...

    with pytest.raises(ToolDefinitionError, match="a parameter type cannot be described"):
        tool(f)


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_non_positive_timeout_is_refused(timeout: float) -> None:
    with pytest.raises(ToolDefinitionError, match="timeout must be positive"):

        @tool(timeout=timeout)
        def f() -> None: ...


# --- parse_arguments ----------------------------------------------------------------


@tool
def book(city: str, nights: int, breakfast: bool = False) -> str:
    """Book a hotel."""
    return city


def test_parse_arguments_validates_and_fills_defaults() -> None:
    assert book.parse_arguments('{"city": "Oslo", "nights": "2"}') == {
        "city": "Oslo",
        "nights": 2,
        "breakfast": False,
    }


@pytest.mark.parametrize("text", ['{"city": "Oslo", "nights": 2', "city=Oslo", "{'city': 1}"])
def test_not_json_is_told_apart(text: str) -> None:
    with pytest.raises(ArgumentsError) as info:
        book.parse_arguments(text)
    err = info.value
    assert err.not_json
    assert err.tool_name == "book"
    assert "are not valid JSON" in str(err)
    assert "failed validation" not in str(err)


def test_validation_failure_names_the_argument() -> None:
    with pytest.raises(ArgumentsError) as info:
        book.parse_arguments('{"city": "Oslo", "nights": "many"}')
    err = info.value
    assert not err.not_json
    assert "failed validation" in str(err)
    assert "argument 'nights'" in err.detail
    assert '"many"' in err.detail  # shows what was sent


def test_validation_names_every_missing_and_extra_argument() -> None:
    with pytest.raises(ArgumentsError) as info:
        book.parse_arguments('{"nights": 1, "stars": 5}')
    detail = info.value.detail
    assert "argument 'city': Field required" in detail
    assert "argument 'stars'" in detail
    assert "Extra inputs are not permitted" in detail


def test_json_that_is_not_an_object_fails_validation() -> None:
    with pytest.raises(ArgumentsError) as info:
        book.parse_arguments("[1, 2]")
    assert not info.value.not_json


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("[1, 2]", "a list"),
        ("[]", "a list"),
        ("3", "a number"),
        ("2.5", "a number"),
        ('"Oslo"', "a string"),
        ("null", "null"),
        ("true", "a boolean"),
    ],
)
def test_arguments_that_are_not_an_object_say_so_without_naming_an_argument(
    text: str, kind: str
) -> None:
    with pytest.raises(ArgumentsError) as info:
        book.parse_arguments(text)
    assert info.value.detail == f"the arguments must be a JSON object, got {kind}"
    assert "argument 'arguments'" not in str(info.value)


def test_long_inputs_are_shortened_in_the_message() -> None:
    with pytest.raises(ArgumentsError) as info:
        book.parse_arguments('{"city": "Oslo", "nights": "' + "n" * 500 + '"}')
    assert "..." in info.value.detail
    assert len(info.value.detail) < 200


# --- a schema given, not read from the signature (an MCP server's) ------------------

GIVEN = {
    "type": "object",
    "properties": {"word": {"type": "string"}, "max-hits": {"type": "integer"}},
    "required": ["word"],
}


async def _echo(**arguments: Any) -> dict[str, Any]:
    return arguments


def test_a_given_schema_is_told_to_the_model_as_it_is() -> None:
    given = Tool(_echo, name="lookup", description="Look a word up.", parameters=GIVEN)
    assert given.schema.parameters == GIVEN
    assert given.schema.description == "Look a word up."
    assert given.context_param is None
    assert given.is_async


def test_a_given_schema_passes_the_arguments_as_they_are() -> None:
    given = Tool(_echo, name="lookup", parameters=GIVEN)
    # Names that are not Python identifiers, and values the schema would not check here
    # (the tool's own server validates them): passed through unchanged.
    assert given.parse_arguments('{"word": "bee", "max-hits": "3"}') == {
        "word": "bee",
        "max-hits": "3",
    }


@pytest.mark.parametrize(
    ("text", "not_json", "detail"),
    [
        ('{"word": ', True, "EOF while parsing"),
        ("[1]", False, "the arguments must be a JSON object, got a list"),
        ('{"max-hits": 2}', False, "argument 'word': Field required"),
    ],
)
def test_a_given_schema_still_checks_json_objects_and_required_arguments(
    text: str, not_json: bool, detail: str
) -> None:
    given = Tool(_echo, name="lookup", parameters=GIVEN)
    with pytest.raises(ArgumentsError) as info:
        given.parse_arguments(text)
    assert info.value.not_json is not_json
    assert detail in info.value.detail


def test_a_given_schema_checks_everything_when_asked_to_in_full() -> None:
    given = Tool(_echo, name="lookup", parameters=GIVEN)
    edit = '{"word": ["bee"], "max-hits": "3"}'
    assert given.parse_arguments(edit) == {"word": ["bee"], "max-hits": "3"}  # its server's
    with pytest.raises(ArgumentsError) as info:
        given.parse_arguments(edit, in_full=True)  # a person's edit: nothing checks it later
    assert info.value.detail == (
        "argument 'max-hits': '3' is not of type 'integer'; "
        "argument 'word': ['bee'] is not of type 'string'"
    )
    assert given.parse_arguments('{"word": "bee"}', in_full=True) == {"word": "bee"}
    # A schema that is not one checks what it can: the object and its required keys.
    broken = Tool(
        _echo, name="odd", parameters={"type": "object", "properties": {"a": {"type": 5}}}
    )
    assert broken.parse_arguments('{"a": 1}', in_full=True) == {"a": 1}


def test_a_renamed_tool_keeps_its_given_schema() -> None:
    given = Tool(_echo, name="lookup", parameters=GIVEN, side_effects=True, idempotent=True)
    again = given.renamed("find")
    assert again.schema.parameters == GIVEN
    assert (again.side_effects, again.idempotent) == (True, True)


# --- ToolRegistry -------------------------------------------------------------------


def test_registry_holds_tools_by_name_and_wraps_plain_functions() -> None:
    def shout(text: str) -> str:
        return text.upper()

    registry = ToolRegistry([book, shout])
    assert registry.names == ("book", "shout")
    assert len(registry) == 2
    assert "book" in registry
    assert "nope" not in registry
    assert registry["book"] is book
    assert isinstance(registry["shout"], Tool)
    assert registry.get("nope") is None
    assert [s.name for s in registry.schemas] == ["book", "shout"]
    assert list(registry) == [book, registry["shout"]]


def test_registry_accepts_the_same_tool_twice() -> None:
    registry = ToolRegistry([book])
    assert registry.add(book) is book
    assert len(registry) == 1


def test_registry_refuses_a_different_tool_under_a_taken_name() -> None:
    @tool(name="book")
    def other_book(city: str) -> str:
        return city

    registry = ToolRegistry([book])
    with pytest.raises(DuplicateToolError, match="'book'") as info:
        registry.add(other_book)
    assert info.value.tool_name == "book"
    assert registry["book"] is book  # the first one stays


def test_registry_schemas_follow_additions() -> None:
    registry = ToolRegistry([book])
    assert [s.name for s in registry.schemas] == ["book"]
    registry.add(sample_tools.add)
    assert [s.name for s in registry.schemas] == ["book", "add"]


def test_resolve_by_registry_name() -> None:
    registry = ToolRegistry([book])
    assert registry.resolve("book") is book


def test_resolve_by_import_path_to_a_tool() -> None:
    resolved = ToolRegistry().resolve("tests.support.sample_tools:add")
    assert resolved is sample_tools.add
    assert resolved.description == "Add two numbers."
    assert schema_of(resolved)["properties"]["a"]["description"] == "The first number."


def test_resolve_by_import_path_to_a_plain_function() -> None:
    resolved = ToolRegistry().resolve("tests.support.sample_tools:shout")
    assert isinstance(resolved, Tool)
    assert resolved.name == "shout"
    assert resolved.fn is sample_tools.shout


def test_resolve_an_import_path_to_something_not_callable() -> None:
    with pytest.raises(ToolDefinitionError, match="is a int, not a function"):
        ToolRegistry().resolve("tests.support.sample_tools:NOT_A_FUNCTION")


@pytest.mark.parametrize(
    ("ref", "names"),
    [
        ("tests.support.no_such_module:add", "no module named 'tests.support.no_such_module'"),
        ("tests.support.sample_tools:nope", "has no attribute 'nope'"),
    ],
)
def test_resolve_an_import_path_that_does_not_import(ref: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        ToolRegistry().resolve(ref)


def test_unknown_names_list_the_available_ones() -> None:
    registry = ToolRegistry([book, sample_tools.add])
    with pytest.raises(UnknownToolError) as info:
        registry.resolve("boook")
    assert info.value.tool_name == "boook"
    assert info.value.available == ("add", "book")
    assert "available tools: add, book" in str(info.value)
    with pytest.raises(UnknownToolError, match="available tools: add, book"):
        registry["boook"]


def test_a_tool_of_the_program_goes_as_its_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """``__main__`` where a tool is unpickled (a Ray actor's process) is another
    program: a tool the program itself holds goes as its function and options, not as
    an attribute of ``__main__`` there."""
    import sys
    import types

    def shout(text: str) -> str:
        """Say it louder.

        Args:
            text: What to say.
        """
        return text.upper()

    shout.__module__, shout.__qualname__ = "__main__", "shout"
    program = types.ModuleType("__main__")
    made = program.shout = tool(shout)
    monkeypatch.setitem(sys.modules, "__main__", program)
    remake, arguments = made.__reduce__()
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # elsewhere
    again = remake(*arguments)
    assert again.fn is shout
    assert again.options() == made.options()
    assert again.schema == made.schema


def test_a_tool_sent_by_value_takes_its_annotations_resolved_where_it_was_made() -> None:
    """A function sent by value (cloudpickle's way, for a closure or a function of
    ``__main__``) arrives with only the globals its code uses: its postponed
    annotations (``context: ToolContext`` under ``from __future__ import annotations``)
    name what is not there, so the tool is made again from the hints resolved where it
    was made."""
    import types

    def make() -> Tool[..., str]:
        def stamp(
            text: str, times: Annotated[int, Field(ge=1)], ink: Literal["red", "blue"],
            context: ToolContext,
        ) -> str:  # fmt: skip
            """Stamp a note.

            Args:
                text: What to stamp.
                times: How many times.
                ink: Its colour.
            """
            return f"{text} x{times} in {ink} ({context.call_id})"

        return Tool(stamp, timeout=3.0)

    made = make()
    remake, (fn, *rest) = made.__reduce__()
    sent = types.FunctionType(fn.__code__, {"__builtins__": __builtins__}, fn.__name__)
    sent.__annotations__, sent.__doc__ = dict(fn.__annotations__), fn.__doc__
    again = remake(sent, *rest)
    assert again.context_param == "context"
    assert again.schema == made.schema
    assert again.options() == made.options()
    with pytest.raises(ArgumentsError, match="'times'"):
        again.parse_arguments('{"text": "hi", "times": 0, "ink": "red"}')
    assert again.fn("hi", 2, "red", ToolContext(call_id="c1")) == "hi x2 in red (c1)"


def test_unknown_name_in_an_empty_registry() -> None:
    with pytest.raises(UnknownToolError, match="available tools: none"):
        ToolRegistry().resolve("anything")


def test_a_tool_pickles_by_its_import_path_or_as_its_function_and_options() -> None:
    """A tool crosses to another process (a Ray actor): one a module holds as its
    import path, any other as its function and options, made again there with the same
    schema and scheduling."""
    import pickle

    from tests.support import ray_tools

    assert pickle.loads(pickle.dumps(ray_tools.ledger)) is ray_tools.ledger
    made = Tool(ray_tools.record_line, exclusive="lines", timeout=2.0)
    again = pickle.loads(pickle.dumps(made))
    assert again is not made
    assert again.schema == made.schema
    assert again.options() == made.options()
    assert (again.exclusive, again.side_effects, again.timeout) == ("lines", True, 2.0)
    assert again.parse_arguments('{"path": "p", "line": "l"}') == {"path": "p", "line": "l"}
