"""Tools: ``@tool`` turns a typed function into a tool with a JSON schema; a
``ToolRegistry`` holds tools by unique name.

The schema comes from the signature, type hints and Google-style docstring through
pydantic: ``Annotated[..., Field(description=...)]``, defaults, ``Literal``/``Enum``,
nested models and lists all work. Arguments are validated before the function runs.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
import sys
import types
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, ParamSpec, TypeVar, get_type_hints, overload

import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo

from runtime.config.imports import import_object
from runtime.errors import (
    DuplicateToolError,
    ToolDefinitionError,
    UnknownToolError,
    did_you_mean,
)
from runtime.model import ToolSchema
from runtime.value import Value, pydantic_errors

__all__ = [
    "ArgumentsError",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "arguments_text",
    "idempotency_key",
    "tool",
]

P = ParamSpec("P")
R = TypeVar("R")


class ToolContext(Value, frozen=True, kw_only=True):
    """Injected into a tool that declares a parameter of this type (not in the schema).

    Attributes:
        call_id: The model's id for this call.
        worker: The worker making the call, if known.
        run_id: The run the call belongs to, if known.
        turn: The loop turn (1-based).
        idempotency_key: This call's key for a service that deduplicates requests (a
            payment API's ``Idempotency-Key``): the same every time this call is made,
            retried or made again by a resumed run (a side-effecting call of a stored
            run is, see :mod:`runtime.tools.journal`), and another for every other call, of
            this run or any other (a run of the same id in another store, or without
            one, included). Empty only in a context made by hand.
    """

    call_id: str
    worker: str | None = None
    run_id: str | None = None
    turn: int = 0
    idempotency_key: str = ""


def idempotency_key(scope: str, worker: str | None, turn: int, call_id: str) -> str:
    """The idempotency key of call ``call_id`` of ``worker``'s turn ``turn``, in the run
    ``scope`` names (see :attr:`ToolContext.idempotency_key`): a digest, so that it
    says nothing of the run to the service it is sent to."""
    named = "\0".join((scope, worker or "", str(turn), call_id))
    return "honeycomb-" + hashlib.sha256(named.encode()).hexdigest()[:32]


class ArgumentsError(ValueError):
    """The model's arguments for a tool are not JSON, or fail validation.

    Attributes:
        not_json: True when the text is not JSON at all.
        detail: A readable account of every problem, naming each argument.
    """

    def __init__(self, tool_name: str, detail: str, *, not_json: bool) -> None:
        self.tool_name = tool_name
        self.detail = detail
        self.not_json = not_json
        kind = "are not valid JSON" if not_json else "failed validation"
        super().__init__(f"arguments for {tool_name!r} {kind}: {detail}")


class Tool(Generic[P, R]):
    """A function the model can call, with its schema and how it must be scheduled.

    Attributes:
        name: The name the model calls it by.
        description: What it does, told to the model.
        side_effects: Runs one at a time, in the order the model emitted the calls.
        exclusive: A lock key; calls sharing it never overlap, across workers too.
            Implies ``side_effects``.
        timeout: Seconds a call may take before it is cancelled (None: the default).
        terminal: Its result ends the worker's loop as the final answer.
        idempotent: Running it twice has the effect of running it once, so a call
            whose outcome a crash lost is run again on resume (see :mod:`runtime.tools.journal`).
        parameters: The JSON schema of the arguments, for a tool whose schema comes
            from elsewhere than its signature (an MCP server's): the function takes
            the model's JSON object as keyword arguments, as they are, checked only for
            being an object with the required keys (its own server checks the rest); a
            person's edit of them is checked against all of it (``parse_arguments(...,
            in_full=True)``).
        approval: A person must approve each call before it runs (see
            :mod:`runtime.tools.approvals`).
        durable: A worker's state asking for a call is saved before the call runs
            (as one asking for a side effect is), so a resumed worker runs that very
            call again, by its id: a nested worker's (``agent:ROLE``) continues
            where it stopped.
        pinned: Its calls need the run's own process (an MCP server's session, a
            nested worker's run): where a run's workers run in other processes (on
            Ray), their calls of it are made back in the run's process.
        nests: Its calls only wait for nested workers or a sub-run (``agent:`` and
            ``hive:`` tools), whose own calls hold the run's limits: a call of it
            holds no ``tool_concurrency`` slot, so no nested call ever waits for a
            slot its ancestor holds. It cannot be ``exclusive`` (its workers' calls
            would wait for its lock). Only such a call may pause for a person's
            approval of its workers' calls (``ApprovalNeeded``): the turn's other
            calls run to their end meanwhile.
        describe: Says what a call will do, in the tool's own words, from its
            arguments (as JSON values): shown to the person asked to approve it.
        ready: Awaited before each call's time limit starts: what the tool needs
            first and is not its own time (an MCP tool's server started, or started
            again); what it raises is the call's failure.
        remote: Its calls are carried out elsewhere (by an MCP server): cancelling one
            only asks that it stop, so a side-effecting call cut off by its time limit
            may have had its effects, or have them yet, and its observation says so.
    """

    def __init__(
        self,
        fn: Callable[P, R] | Callable[P, Awaitable[R]],
        *,
        name: str | None = None,
        description: str | None = None,
        side_effects: bool = False,
        exclusive: str | None = None,
        timeout: float | None = None,
        terminal: bool = False,
        idempotent: bool = False,
        parameters: dict[str, Any] | None = None,
        approval: bool = False,
        durable: bool = False,
        pinned: bool = False,
        nests: bool = False,
        describe: Callable[[dict[str, Any]], str] | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        remote: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name if name is not None else fn.__name__
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ToolDefinitionError(
                self.name, "names may use only letters, digits, '_' and '-' (1 to 64 chars)"
            )
        doc_summary, doc_args = _parse_docstring(inspect.getdoc(fn) or "")
        self.description = description if description is not None else doc_summary
        if nests and exclusive is not None:
            raise ToolDefinitionError(
                self.name,
                f"a tool that runs nested workers cannot be exclusive ({exclusive!r}): "
                "their own calls would wait for its lock",
            )
        self.exclusive = exclusive
        self.side_effects = side_effects or exclusive is not None
        if timeout is not None and timeout <= 0:
            raise ToolDefinitionError(self.name, f"timeout must be positive, got {timeout}")
        self.timeout = timeout
        self.terminal = terminal
        self.idempotent = idempotent
        self.approval = approval
        self.durable = durable
        self.pinned = pinned
        self.nests = nests
        self.describe = describe
        self.ready = ready
        self.remote = remote
        self.is_async = inspect.iscoroutinefunction(fn)
        self.parameters = parameters
        self.context_param: str | None = None
        self._validate_json: Callable[[str], BaseModel | dict[str, Any]]
        if parameters is None:
            model, self.context_param = _arguments_model(self.name, fn, doc_args)
            self._validate_json = model.model_validate_json
            parameters = _clean_schema(model)
        else:
            self._validate_json = _ObjectWith(self.name, parameters.get("required", ())).validate
        self.schema = ToolSchema(
            name=self.name, description=self.description, parameters=parameters
        )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R | Awaitable[R]:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        if self.exclusive:
            return f"Tool({self.name!r}, exclusive={self.exclusive!r})"
        return f"Tool({self.name!r}, side_effects)" if self.side_effects else f"Tool({self.name!r})"

    def renamed(self, name: str) -> Tool[P, R]:
        """The same tool under another name (for a registry's own naming)."""
        return Tool(self.fn, **{**self.options(), "name": name})

    def parse_arguments(self, arguments: str, *, in_full: bool = False) -> dict[str, Any]:
        """Validate the model's JSON arguments into keyword arguments for the function.

        Args:
            arguments: The JSON text.
            in_full: For a tool given its schema (``parameters``), check them against
                all of it, not only for an object with the required keys: what a
                person's edit of them is held to, for nothing checks it again before
                it is final (with the ``jsonschema`` package, which the ``mcp`` extra
                brings; without it, only the object and its keys are checked).

        Raises:
            ArgumentsError: when the text is not JSON or fails validation.
        """
        text = arguments if arguments.strip() else "{}"
        try:
            parsed: pydantic.BaseModel | dict[str, Any] = self._validate_json(text)
        except pydantic.ValidationError as exc:
            errors = pydantic_errors(exc)
            not_json = any(e["type"] == "json_invalid" for e in errors)
            raise ArgumentsError(self.name, _describe(errors), not_json=not_json) from exc
        if isinstance(parsed, dict):  # a given schema's: the object as it is
            if in_full and self.parameters is not None:
                problems = _schema_problems(self.parameters, parsed)
                if problems:
                    raise ArgumentsError(self.name, "; ".join(problems), not_json=False)
            return parsed
        return parsed.__dict__  # the fields, as keyword arguments (the model is dropped)

    def __reduce__(self) -> tuple[Callable[..., Tool[Any, Any]], tuple[Any, ...]]:
        """Pickled by its import path when a module holds it (``@tool`` on a module's
        function), else as its function and options, made again where it is unpickled
        (its arguments' model is made from the function, not sent). ``__main__`` is
        another program in the process that unpickles it: a tool of the program goes
        as its function (which cloudpickle sends by value), with its type hints
        resolved here when its annotations are postponed (strings): a function sent
        by value takes only the globals its code uses, not those its annotations name."""
        module = sys.modules.get(getattr(self.fn, "__module__", None) or "")
        qualname = getattr(self.fn, "__qualname__", "")
        if (
            module is not None
            and module.__name__ != "__main__"
            and getattr(module, qualname, None) is self
        ):
            return _imported, (module.__name__, qualname)
        return _remade, (self.fn, self.options(), _postponed_hints(self.fn))

    def options(self) -> dict[str, Any]:
        """What it was made with besides its function (``Tool(fn, **options)``)."""
        return {
            "name": self.name,
            "description": self.description,
            "side_effects": self.side_effects,
            "exclusive": self.exclusive,
            "timeout": self.timeout,
            "terminal": self.terminal,
            "idempotent": self.idempotent,
            "parameters": self.parameters,
            "approval": self.approval,
            "durable": self.durable,
            "pinned": self.pinned,
            "nests": self.nests,
            "describe": self.describe,
            "ready": self.ready,
            "remote": self.remote,
        }


def _imported(module: str, name: str) -> Tool[Any, Any]:
    found: Tool[Any, Any] = getattr(importlib.import_module(module), name)
    return found


def _remade(
    fn: Callable[..., Any], options: dict[str, Any], hints: dict[str, Any] | None = None
) -> Tool[..., Any]:
    if hints is not None and not _resolvable(fn):
        fn = _annotated(fn, hints)
    return Tool(fn, **options)


def _postponed_hints(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """A function's type hints, resolved, when some of its annotations are strings."""
    annotations = getattr(fn, "__annotations__", None) or {}
    if not any(isinstance(a, str) for a in annotations.values()):
        return None
    try:
        return get_type_hints(fn, include_extras=True)
    except (NameError, TypeError):  # a tool with its own schema may leave them unread
        return None


def _resolvable(fn: Callable[..., Any]) -> bool:
    try:
        get_type_hints(fn, include_extras=True)
    except (NameError, TypeError):
        return False
    return True


def _annotated(fn: Callable[..., Any], hints: dict[str, Any]) -> Callable[..., Any]:
    """A copy of the function ``fn`` with ``hints`` for its annotations."""
    if not isinstance(fn, types.FunctionType):
        return fn
    copy = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__dict__.update(fn.__dict__)
    copy.__module__, copy.__qualname__, copy.__doc__ = fn.__module__, fn.__qualname__, fn.__doc__
    copy.__annotations__ = dict(hints)
    return copy


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    side_effects: bool = False,
    exclusive: str | None = None,
    timeout: float | None = None,
    terminal: bool = False,
    idempotent: bool = False,
    approval: bool = False,
    describe: Callable[[dict[str, Any]], str] | None = None,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effects: bool = False,
    exclusive: str | None = None,
    timeout: float | None = None,
    terminal: bool = False,
    idempotent: bool = False,
    approval: bool = False,
    describe: Callable[[dict[str, Any]], str] | None = None,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a sync or async function a tool; use bare (``@tool``) or with options.

    Raises:
        ToolDefinitionError: when a parameter has no type hint, the function takes
            ``*args``/``**kwargs``, or an option is invalid.
    """

    def make(f: Callable[P, R]) -> Tool[P, R]:
        return Tool(
            f,
            name=name,
            description=description,
            side_effects=side_effects,
            exclusive=exclusive,
            timeout=timeout,
            terminal=terminal,
            idempotent=idempotent,
            approval=approval,
            describe=describe,
        )

    return make(fn) if fn is not None else make


class ToolRegistry:
    """Tools by unique name. Refuses a second, different tool under a taken name.

    Attributes:
        nests: Whether one of its tools runs nested workers (``Tool.nests``).
        ends: Whether one of its tools is ``terminal`` (its result ends its worker).
    """

    def __init__(self, tools: Iterable[Tool[Any, Any] | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any, Any]] = {}
        self._schemas: tuple[ToolSchema, ...] | None = None
        self.nests = self.ends = False
        for t in tools:
            self.add(t)

    def add(self, item: Tool[Any, Any] | Callable[..., Any]) -> Tool[Any, Any]:
        """Register a tool (a plain function is wrapped with ``@tool``).

        Raises:
            DuplicateToolError: when another tool already has this name.
        """
        t = item if isinstance(item, Tool) else tool(item)
        existing = self._tools.get(t.name)
        if existing is not None and existing is not t:
            raise DuplicateToolError(t.name)
        self._tools[t.name] = t
        self._schemas = None
        self.nests = self.nests or t.nests
        self.ends = self.ends or t.terminal
        return t

    def resolve(self, ref: str) -> Tool[Any, Any]:
        """A tool by registry name or by import path ``package.module:function``.

        Raises:
            UnknownToolError: for a name that is neither registered nor importable.
            ConfigError: for an import path that cannot be imported.
        """
        if ref in self._tools:
            return self._tools[ref]
        if ":" in ref:
            obj = import_object(ref)
            if isinstance(obj, Tool):
                return obj
            if callable(obj):
                return tool(obj)
            raise ToolDefinitionError(ref, f"{ref!r} is a {type(obj).__name__}, not a function")
        raise UnknownToolError(ref, self.names)

    def get(self, name: str) -> Tool[Any, Any] | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool[Any, Any]:
        found = self._tools.get(name)
        if found is None:
            raise UnknownToolError(name, self.names)
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool[Any, Any]]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._tools))

    @property
    def schemas(self) -> tuple[ToolSchema, ...]:
        if self._schemas is None:
            self._schemas = tuple(t.schema for t in self._tools.values())
        return self._schemas

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)})"


class _ObjectWith:
    """Checks a tool's JSON arguments against a schema given as it is: a JSON object,
    with the required keys."""

    def __init__(self, tool_name: str, required: Iterable[str]) -> None:
        self.tool_name = tool_name
        self.required = tuple(required)

    def validate(self, text: str) -> dict[str, Any]:
        """The arguments as a dict.

        Raises:
            ArgumentsError: when the text is not JSON, not an object, or lacks a key.
        """
        try:
            value = pydantic_core.from_json(text)
        except ValueError as exc:
            raise ArgumentsError(self.tool_name, f"Invalid JSON: {exc}", not_json=True) from exc
        if not isinstance(value, dict):
            detail = f"the arguments must be a JSON object, got {_json_kind(value)}"
            raise ArgumentsError(self.tool_name, detail, not_json=False)
        missing = [f"argument {k!r}: Field required" for k in self.required if k not in value]
        if missing:
            raise ArgumentsError(self.tool_name, "; ".join(missing), not_json=False)
        return value


def _schema_problems(schema: Mapping[str, Any], value: dict[str, Any]) -> list[str]:
    """Where ``value`` breaks the JSON schema ``schema``, each naming its argument (none
    without the jsonschema package)."""
    try:
        import jsonschema  # the mcp extra's: loaded by the first edit of an MCP tool's call
        import referencing.exceptions
    except ImportError:
        return []
    kind = jsonschema.validators.validator_for(schema)
    try:
        kind.check_schema(schema)
        errors = list(kind(schema).iter_errors(value))
    except (jsonschema.SchemaError, referencing.exceptions.Unresolvable):
        return []  # a schema that is not one, or names others: its server checks
    problems = []
    for error in sorted(errors, key=lambda e: list(map(str, e.path))):
        where = ".".join(str(part) for part in error.absolute_path)
        message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
        problems.append(f"argument {where!r}: {message}" if where else f"the arguments: {message}")
    return problems


# --- schema building -----------------------------------------------------------------


def _arguments_model(
    tool_name: str, fn: Callable[..., Any], doc_args: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    try:
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ToolDefinitionError(tool_name, f"cannot read the signature: {exc}") from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                tool_name, f"parameter {param.name!r}: *args and **kwargs cannot be described"
            )
        if param.name not in hints:
            raise ToolDefinitionError(tool_name, f"parameter {param.name!r} has no type hint")
        annotation = hints[param.name]
        if annotation is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        info = FieldInfo.from_annotated_attribute(annotation, default)
        if info.description is None:  # Annotated[..., Field(description=...)] wins
            info.description = doc_args.get(param.name)
        fields[param.name] = (info.annotation, info)
    described = [name for name in doc_args if name not in signature.parameters]
    if described:  # a typo, or a parameter renamed since: its text would reach no one
        raise ToolDefinitionError(
            tool_name,
            f"its docstring's Args: describes {described[0]!r}, which is no parameter of it"
            f"{did_you_mean(described[0], list(signature.parameters))}; its parameters: "
            f"{', '.join(signature.parameters) or 'none'}",
        )
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        model = pydantic.create_model(f"{tool_name}_arguments", __config__=config, **fields)
        model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        raise ToolDefinitionError(
            tool_name, f"a parameter type cannot be described: {exc}"
        ) from exc
    return model, context_param


def _clean_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


# Patterns as strings: re compiles each on first use and keeps it (not at import).
_SECTION = r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$"
_ARG = r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$"


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (text before the first section) and Google-style ``Args:``: an
    argument at the indentation of the first, a line indented deeper the text of the one
    above (``default: 5`` there is no argument)."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None  # of the section's arguments
    for line in doc.splitlines():
        header = re.match(_SECTION, line)
        if header:
            section, current, indent = header.group(1), None, None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            match = re.match(_ARG, line)
            at = len(line) - len(line.lstrip())
            if match and (indent is None or at <= indent):
                indent, current = at, match.group(1).lstrip("*")
                args[current] = match.group(2).strip()
            elif current and line.strip():
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), args


def _describe(errors: Sequence[Any]) -> str:
    parts = []
    for err in errors:
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "json_invalid":
            parts.append(err["msg"])
            continue
        if not loc:  # about the arguments as a whole, which name no argument
            if err["type"] == "model_type":
                parts.append(f"the arguments must be a JSON object, got {_json_kind(err['input'])}")
            else:
                parts.append(f"the arguments: {err['msg']}")
            continue
        text = f"argument {loc!r}: {err['msg']}"
        if err["type"] not in ("missing",) and "input" in err:
            shown = pydantic_core.to_json(err["input"], fallback=repr).decode()
            if len(shown) > 80:
                shown = shown[:77] + "..."
            text += f" (got {shown})"
        parts.append(text)
    return "; ".join(parts)


def _json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words: ``a list``, ``a number`` ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else f"a {type(value).__name__}"


def arguments_text(arguments: Mapping[str, Any]) -> str:
    """A call's validated arguments as JSON, as its records show them (the journal,
    an approval, a guard's check): keys sorted, values JSON cannot hold as text."""
    return json.dumps(arguments, default=str, sort_keys=True)
