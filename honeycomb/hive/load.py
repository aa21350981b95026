"""Reading a hive file: models, roles, planner, aggregator, policies and memory in one
YAML file, into a :class:`~honeycomb.hive.hive.Hive`.

Every mistake is reported at once, each with file, line, column and field path, and
a "did you mean" for misspelt names. Import paths (tools, output schemas) resolve in
the hive's folder first, so tools next to it import as ``module:function``; the folder
leads ``sys.path`` only while they are imported (:mod:`honeycomb.hive.imports`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from honeycomb.hive.checks import check_across_fields, not_roles, role_error
from honeycomb.hive.hive import Hive
from honeycomb.hive.imports import imports_from
from honeycomb.hive.meant import another_file, hive_files_in, hive_tool_meant
from honeycomb.hive.paths import beside, folder_of, not_a_folder
from honeycomb.hive.specs import (
    HiveSpec,
    salvaged,
)
from honeycomb.hive.usage import (
    check_called_prices,
    check_models_used,
)
from runtime import (
    ConfigError,
    ConfigErrors,
    ToolRegistry,
    YamlDocument,
    load_yaml,
)
from runtime.config.imports import path_meant
from runtime.config.yaml_config import YamlPlace
from runtime.errors import kind_of
from runtime.secrets import CREDENTIAL_PARAMETERS, add_env, add_header, add_secret
from workers import Role, read_roles
from workers.nesting import hive_ref, nested_tool_name
from workers.role import approval_problems, collect_roles

__all__ = ["load_hive"]


_QUERY_KEYS = tuple(
    ("models", "*", "settings", "extra_query", name) for name in sorted(CREDENTIAL_PARAMETERS)
)
"""Where a model's settings hold the key an endpoint takes in its URL's query
(Gemini's ``key``, Azure's ``api-key``): masked as its API key is."""

_SECRETS = (
    ("models", "*", "api_key"),
    *_QUERY_KEYS,
    ("models", "*", "settings", "extra_headers"),
    ("memory", "embeddings", "api_key"),
    ("mcp_servers", "*", "env"),
    ("mcp_servers", "*", "headers"),
    ("backend", "ray", "runtime_env", "env_vars"),
)
"""Where a hive holds secrets: no error shows what is there, only the field and the
value's type."""

_KEYS_READ_WHERE_USED = (("models", "*", "api_key"), ("memory", "embeddings", "api_key"))
"""The keys a model (or the memory's embeddings) reads from the environment where it
is made (``api_key: ${NAME}``): a variable not set there is the environment's mistake,
not the file's, told for the models a run calls (as a key not given at all is), and
never for one it does not (a model declared for later, one that ``--model`` or
``--replay`` stands in for; embeddings ``honeycomb memory list`` does not call)."""


def load_hive(path: str | Path) -> Hive:
    """Read and check a hive file, and the hives its roles call as tools (``hive:PATH``,
    relative to the file).

    Raises:
        ConfigErrors: every problem, each with file, line, column and field path.
    """
    return _load(Path(path), ())


def _load(file: Path, chain: tuple[Path, ...], limits: tuple[int, ...] = ()) -> Hive:
    """A hive file, called as a tool through the hive files of ``chain`` (outermost
    first), whose ``max_nesting`` are ``limits``."""
    try:
        doc = load_yaml(
            file, interpolate=True, secrets=_SECRETS, read_where_used=_KEYS_READ_WHERE_USED
        )
    except ConfigError as exc:
        raise ConfigErrors([hive_files_in(file, exc)]) from exc
    errors: list[ConfigError] = []
    if not isinstance(doc.data, Mapping):
        what = (
            "it is empty (or only comments)" if doc.data is None else f"it is {kind_of(doc.data)}"
        )
        raise ConfigErrors(
            [
                doc.error(
                    (),
                    f"a hive file must be a mapping (models:, roles: ...), and {what}: "
                    "honeycomb init DIR writes one to start from",
                )
            ]
        )
    other = another_file(doc, file)  # evals.yaml, or a file of roles, beside hive.yaml
    if other is not None:
        raise ConfigErrors([other])
    spec, problems = doc.validate(HiveSpec, doc.data)
    errors.extend(problems)
    if spec is None:
        spec = HiveSpec.model_validate(salvaged(doc.data))
    models = _model_names(doc, spec)
    with imports_from(file.resolve().parent):  # tools and schemas next to the hive
        registry = _registry(doc, spec, errors)
        read = _roles(doc, spec, registry, models, file, errors)
        # What the files of roles_dir read from the environment, an error about the
        # hive (which may quote their roles) hides too.
        doc = doc.hiding([place.doc for place, _ in read.values()])
        roles = {name: role for name, (_, role) in read.items()}
        roles = _with_approvals(doc, spec, roles, registry, errors)
        places = {name: place for name, (place, _) in read.items()}  # where each is written
        check_across_fields(doc, spec, roles, places, models, errors)  # its guards' imports
        check_models_used(doc, spec, roles, errors)
    outer = ((*chain, file.resolve()), (*limits, spec.policy.max_nesting))
    hives = _sub_hives(doc, spec, roles, places, file, outer, errors)
    check_called_prices(doc, spec, roles, places, hives, errors)  # their calls spend its budget
    if errors:
        raise ConfigErrors(sorted(errors, key=lambda e: (e.file or "", e.line or 0, e.column or 0)))
    hive = Hive(file, spec, roles, registry, doc, hives, places)
    _mask_declared(hive, doc.data)
    for secret, what in doc.hidden.items():  # a URL's password in any value: a Ray address
        if what == "password":
            add_secret(secret, what, owner=hive)
    return hive


def _mask_declared(hive: Hive, data: Mapping[str, Any]) -> None:
    """Mask the secrets the hive declares (:data:`_SECRETS`) while it lives, whether or
    not what uses them is made: a model another stands in for (``--model``), an MCP
    server not started yet. Else a key pasted into a task or a chat message is kept and
    shown as it is. An OpenAI-compatible model or embeddings with no ``api_key`` of their
    own use ``OPENAI_API_KEY``: that too. (An Executor made from it keeps it.)"""
    for pattern in _SECRETS:
        for value in _values_at(data, pattern):
            if isinstance(value, Mapping) and pattern[-1].endswith("headers"):
                for each in value.values():
                    if isinstance(each, str):
                        add_header(each, owner=hive)
            elif isinstance(value, Mapping):  # an environment's variables
                add_env({str(k): v for k, v in value.items() if isinstance(v, str)}, owner=hive)
            elif isinstance(value, str):
                key = pattern[-1] == "api_key" or pattern in _QUERY_KEYS
                add_secret(value, "api key" if key else "secret", owner=hive)
    memory = hive.spec.memory
    embeddings = memory.embeddings if memory is not None else None
    for spec in [*hive.spec.models.values(), embeddings, hive.spec.store]:
        # A base_url's password or ?key=, which the model registers only once it is made.
        for secret, what in spec.secrets_held().items() if spec is not None else ():
            add_secret(secret, what, owner=hive)
    keyless = any(m.provider == "openai" and m.api_key is None for m in hive.spec.models.values())
    if keyless or (embeddings is not None and embeddings.api_key is None):
        add_secret(os.environ.get("OPENAI_API_KEY"), "api key", owner=hive)


def _values_at(data: Any, pattern: tuple[str, ...]) -> Iterator[Any]:
    """The values of ``data`` at ``pattern``'s path (``"*"``: any key)."""
    if not pattern:
        yield data
    elif isinstance(data, Mapping):
        head, rest = pattern[0], pattern[1:]
        for key, value in data.items():
            if head in ("*", key):
                yield from _values_at(value, rest)


def _registry(doc: YamlDocument, spec: HiveSpec, errors: list[ConfigError]) -> ToolRegistry:
    registry = ToolRegistry()
    for name, ref in spec.tools.items():
        if ":" not in ref:  # a name here names nothing: what tools: names is a path
            meant = path_meant(ref)
            close = f" (did you mean {meant!r}?)" if meant is not None else ""
            message = f"{ref!r} is not an import path: write 'package.module:function'{close}"
            errors.append(doc.error(("tools", name), message))
            continue
        try:
            found = ToolRegistry().resolve(ref)
            registry.add(found if found.name == name else found.renamed(name))
        except Exception as exc:  # every import problem is one located error
            message = exc.message if isinstance(exc, ConfigError) else str(exc)
            errors.append(doc.error(("tools", name), message))
    return registry


def _server_names(doc: YamlDocument, spec: HiveSpec) -> list[str]:
    """The MCP servers a role may name: those declared, valid or not (as models)."""
    raw = doc.data.get("mcp_servers")
    return [str(k) for k in raw] if isinstance(raw, Mapping) else list(spec.mcp_servers)


def _model_names(doc: YamlDocument, spec: HiveSpec) -> list[str]:
    """The models a role may name: those declared, valid or not (an invalid one has
    its own error; a role naming it has none)."""
    raw = doc.data.get("models")
    return [str(k) for k in raw] if isinstance(raw, Mapping) else list(spec.models)


def _roles(
    doc: YamlDocument,
    spec: HiveSpec,
    registry: ToolRegistry,
    models: list[str],
    file: Path,
    errors: list[ConfigError],
) -> dict[str, tuple[YamlPlace, Role]]:
    """The valid roles of the hive, of its ``roles_dir`` and its ``roles:``, each with
    where it is written (the hive file, or a file of the folder), for the checks that
    span the hive to point there."""
    read: dict[str, tuple[YamlPlace, Role]] = {}
    if spec.roles_dir is not None:
        folder = beside(folder_of(file), spec.roles_dir)
        problem = not_a_folder(folder)
        if problem is not None:
            errors.append(doc.error(("roles_dir",), problem))
        else:
            servers = _server_names(doc, spec)
            read.update(
                collect_roles(
                    folder,
                    errors,
                    registry,
                    models=models,
                    servers=servers,
                    declared=spec.tools,
                    skip=file,
                    other=not_roles,
                )
            )
    if "roles" in doc.data and isinstance(doc.data["roles"], Mapping):
        servers = _server_names(doc, spec)
        for path, role in read_roles(
            doc, errors, registry, ("roles",), models=models, servers=servers, declared=spec.tools
        ):
            if role.name in read:
                first = read[role.name][0].error((), "")  # in a file of the folder
                where = f"{first.file}:{first.line}"
                errors.append(doc.error(path, f"role {role.name!r} is also defined in {where}"))
            read[role.name] = (YamlPlace(doc=doc, path=path), role)
    if not read and not errors:
        errors.append(doc.error(("roles",), "the hive defines no roles"))
    return read


def _with_approvals(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: dict[str, Role],
    registry: ToolRegistry,
    errors: list[ConfigError],
) -> dict[str, Role]:
    """The roles, those without ``approvals:`` of their own given the hive's (each
    with the tools it names that the role uses; all of them for a role that uses an MCP
    server's tools, which are known once it lists them)."""
    hive = spec.approvals
    if hive is None:
        return roles
    servers = list(spec.mcp_servers)
    used: dict[str, tuple[str, ...] | None] = {}
    for name, role in roles.items():
        try:
            used[name] = role.tool_names(registry, servers=servers)
        except Exception:  # its own error is reported with the role (the hive fails)
            return roles
    if None not in used.values():  # every tool is known: a name none uses is misspelt
        every = sorted({tool for names in used.values() if names for tool in names})
        unused = "which no role of the hive uses"
        errors.extend(approval_problems(doc.data.get("approvals"), every, doc, (), unused))
    given: dict[str, Role] = {}
    for name, role in roles.items():
        if role.approvals is None:
            names = used[name]
            tools = tuple(t for t in hive.tools if names is None or t in names)
            role = role.model_copy(update={"approvals": hive.model_copy(update={"tools": tools})})
        given[name] = role
    return given


def _sub_hives(
    doc: YamlDocument,
    spec: HiveSpec,
    roles: Mapping[str, Role],
    places: Mapping[str, YamlPlace],
    file: Path,
    outer: tuple[tuple[Path, ...], tuple[int, ...]],
    errors: list[ConfigError],
) -> dict[str, Hive]:
    """The hives the roles call as tools, each file loaded once (its own errors are
    told as its, in its file), ``file`` being called through the chain of hive files
    ``outer`` holds (itself last) with their ``max_nesting``. Told at the tool that
    names it: a hive file it cannot load (see :func:`_unreachable`), and a tool name
    taken (see :func:`_name_taken`)."""
    chain, limits = outer
    found: dict[str, Hive] = {}
    loaded: dict[Path, Hive | None] = {}  # None: it has errors, told once
    named: dict[str, tuple[Path, str]] = {}  # a hive tool's name: its file, its first ref
    for name, role in roles.items():
        for index, ref in enumerate(role.tools):
            target = hive_ref(ref)
            if target is None or ref in found:
                continue
            given = beside(folder_of(file), target)  # named as the hive is: relative stays so
            path = given.resolve()  # one file, however it is named
            unreachable = _unreachable(ref, given, chain, limits)
            for problem in (_name_taken(ref, given, spec, named), unreachable):
                if problem is not None:
                    errors.append(role_error(doc, places, name, ("tools", index), problem))
            if unreachable is None:
                if path not in loaded:
                    caller = f"{ref!r} of {file.name}"
                    loaded[path] = _called(given, outer, caller, errors)
                called = loaded[path]
                if called is not None:
                    found[ref] = called
    return found


def _unreachable(
    ref: str, path: Path, chain: tuple[Path, ...], limits: tuple[int, ...]
) -> str | None:
    """Why the hive file ``path`` of the tool ``ref``, called through the hive files
    of ``chain``, cannot be loaded: a cycle of hive files, a chain of them past the
    ``max_nesting`` of one of them (``limits``: each bounds the chain from it, as a hive
    called as a tool is bounded by its callers' limits), no such file; None when it
    can."""
    shown = " → ".join(p.name for p in (*chain, path))
    if path.resolve() in chain:
        return f"hive tools make a cycle: {shown}"
    for start, limit in enumerate(limits):
        deep = len(chain) - start
        if deep > limit:
            shown = " → ".join(p.name for p in (*chain[start:], path))
            return (
                f"hive tools nest {deep} deep, past the limit of {limit} (the policy "
                f"max_nesting of {chain[start].name}): {shown}"
            )
    if not path.is_file():
        return f"{ref!r}: no hive file {path}{hive_tool_meant(ref, path)}"
    return None


def _name_taken(
    ref: str, path: Path, spec: HiveSpec, named: dict[str, tuple[Path, str]]
) -> str | None:
    """Why the tool ``ref`` (of the hive file ``path``) cannot have its name: a model
    calls a hive tool by its file's stem, and the hive's tools (those of ``tools:``,
    and the hive tools ``named`` so far, each with its file and first reference) have a
    name each. None when it is its own (this file's)."""
    tool = nested_tool_name(ref)
    file, first = named.setdefault(tool, (path, ref))
    if tool in spec.tools:
        return (
            f"{ref!r} is a tool named {tool!r}, as the hive's tools: {tool} is: a hive's "
            "tools need a name each (a hive tool is named after its file): rename the "
            "file, or that tool"
        )
    if file.resolve() != path.resolve():
        return (
            f"{ref!r} ({path}) is a tool named {tool!r}, as {first!r} ({file}) is: a "
            "hive's tools need a name each (a hive tool is named after its file): rename "
            "one of the files"
        )
    return None


def _called(
    path: Path,
    outer: tuple[tuple[Path, ...], tuple[int, ...]],
    caller: str,
    errors: list[ConfigError],
) -> Hive | None:
    """The hive file ``path``, which ``caller`` calls as a tool, loaded and able to
    answer a call: a call plans its task, so the hive needs a planner. None: it cannot,
    and why is added to ``errors`` (in its own file)."""
    try:
        called = _load(path, *outer)
    except ConfigErrors as exc:
        errors.extend(exc.errors)
        return None
    missing = called._planner_missing(f"{caller} calls it as a tool, which plans each call's task")
    if missing is not None:
        errors.append(missing)
        return None
    return called
