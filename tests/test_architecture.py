"""The layers point downward only, and each package's public names are pinned."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pydantic
import pytest

import runtime
import workers
from tests.support import ROOT
from tests.support.api_page import public_modules


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {
    module_name(path): path
    for package in ("runtime", "workers", "honeycomb")
    for path in sorted((ROOT / package).rglob("*.py"))
}


ImportNode = ast.Import | ast.ImportFrom


def import_statements(source: str, filename: str = "<unknown>") -> list[ImportNode]:
    """The import statements of ``source``, anywhere in it (inside functions, ``if
    TYPE_CHECKING:`` blocks, ``try``), in the order of their lines. Only statements
    hold statements: the expressions, most of a tree, are not walked."""
    todo: list[ast.AST] = [ast.parse(source, filename=filename)]
    found: list[ImportNode] = []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                todo.extend(inner)
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


@functools.cache
def imports_in(path: Path) -> list[ImportNode]:
    """The import statements of the file at ``path``, read once for every test of this
    file that needs them (parsing the library for each took seconds)."""
    return import_statements(path.read_text(), filename=str(path))


def imports_of(module: str) -> set[str]:
    """The modules of ours that ``module`` imports, anywhere in it (inside functions
    and ``TYPE_CHECKING`` blocks too): ``from a.b import c`` imports ``a.b.c`` when
    that is a module, else ``a.b``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in imports_in(path):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                       for alias in node.names]  # fmt: skip
        found.update(t for t in targets if t in MODULES and t != module)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Every module's imports of ours, read once, by the first test that needs them
    (not as each test process collects this file: reading them takes a second)."""
    return {module: imports_of(module) for module in MODULES}


def test_no_module_imports_itself_through_others() -> None:
    """No import cycles anywhere: every module of runtime, workers and honeycomb can
    be ordered so that it comes after everything it imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for after in graph()[node]:
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph():
        if module not in index:
            visit(module)
    assert cycles == []


def unit(module: str) -> str:
    """The part of the library a module belongs to: ``runtime``, ``workers``, a
    subpackage of ``honeycomb``, or one of honeycomb's own top-level modules."""
    parts = module.split(".")
    if parts[0] != "honeycomb" or len(parts) == 1:
        return parts[0]
    return ".".join(parts[:2])


LOW = {"runtime", "workers"}
EVALS = {"honeycomb.evals"}
PARTS = {"honeycomb.executor", "honeycomb.run", "honeycomb.hive", "honeycomb.store",
         "honeycomb.trace", "honeycomb.offline", "honeycomb.backends"} | EVALS  # fmt: skip
NAMESPACES = set(public_modules()) - PARTS - {"honeycomb"}
ALLOWED = {
    "runtime": set(),
    "workers": {"runtime"},
    "honeycomb.trace": LOW,
    "honeycomb.store": LOW | {"honeycomb.trace"},
    "honeycomb.run": LOW | {"honeycomb.store", "honeycomb.trace"},
    "honeycomb.offline": LOW | {"honeycomb.run"},
    "honeycomb.hive": LOW | {"honeycomb.run", "honeycomb.offline", "honeycomb.backends"},
    "honeycomb.backends": LOW | {"honeycomb.run"},
    "honeycomb.executor": LOW | {"honeycomb.run", "honeycomb.hive", "honeycomb.store"},
    "honeycomb.evals": LOW | (PARTS - {"honeycomb.evals"}),
    "honeycomb": LOW | PARTS,
    **dict.fromkeys(NAMESPACES, LOW | PARTS),
    "honeycomb.web": LOW | {"honeycomb.run", "honeycomb.store", "honeycomb.trace"} | EVALS,
    "honeycomb.cli": LOW | PARTS | {"honeycomb", "honeycomb.web"},
    "honeycomb.__main__": {"honeycomb.cli"},
}
"""What each part may import: the layers point downward (runtime <- workers <-
honeycomb), and inside honeycomb trace <- store <- run <- offline <- hive <- the
Executor <- evals <- the command line; backends build on run, and the hive makes the one it
declares. ``honeycomb`` and its public namespaces (docs/api.md) gather names from the
parts, and no part imports them."""


def test_each_part_imports_only_the_parts_below_it() -> None:
    assert set(map(unit, MODULES)) == set(ALLOWED)
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if unit(target) != unit(module) and unit(target) not in ALLOWED[unit(module)]
    )
    assert wrong == []


def family(module: str) -> str:
    """The family of runtime a module belongs to: ``runtime.tools``, ``runtime.models``
    ... for a subpackage's modules, ``runtime`` for the values at its root."""
    parts = module.split(".")
    if module == "runtime.testing":
        return "runtime.models"  # the test models
    return ".".join(parts[:2]) if len(parts) > 2 or module in FAMILIES else "runtime"


FAMILIES = {
    "runtime": set(),
    "runtime.config": {"runtime"},
    "runtime.limits": {"runtime"},
    "runtime.models": {"runtime", "runtime.limits", "runtime.config"},
    "runtime.tools": {"runtime", "runtime.limits", "runtime.config"},
    "runtime.memory": {"runtime", "runtime.tools"},
}
"""What each family of runtime may import: the values at its root (messages, the
Model protocol, events, errors) import no family; limits and config build on them;
models on limits (retries, rate limits) and config (an endpoint's URL checked); tools
on limits (deadlines) and config (import paths, an MCP server's URL checked); memory
on tools (a result's text, threads)."""


def test_runtime_families_import_only_the_ones_below_them() -> None:
    inside = [m for m in MODULES if m.startswith("runtime.")]
    assert {family(m) for m in inside} == set(FAMILIES)
    wrong = sorted(
        f"{module} imports {target}"
        for module in inside
        for target in graph()[module]
        if target != "runtime"
        and family(target) != family(module)
        and family(target) not in FAMILIES[family(module)]
    )
    assert wrong == []


def test_runtime_root_holds_only_its_values() -> None:
    """The values and the few helpers every family uses stay at runtime/'s root;
    everything else lives in a family."""
    flat = sorted(p.name for p in (ROOT / "runtime").glob("*.py") if p.name != "__init__.py")
    assert len(flat) <= 11, flat


def owner(path: Path) -> str:
    """The package a file is inside: its own dotted package, or for a test, the
    package its folder mirrors (tests/runtime -> runtime)."""
    parts = list(path.relative_to(ROOT).parent.parts)
    if parts and parts[0] == "tests":
        parts = parts[1:]
    return ".".join(parts)


def test_each_test_folder_mirrors_a_package() -> None:
    """tests/honeycomb/store holds the tests of honeycomb/store, and so on: a test
    folder under tests/runtime, tests/workers or tests/honeycomb is a package's."""
    folders = [
        path.parent
        for package in ("runtime", "workers", "honeycomb")
        for path in (ROOT / "tests" / package).rglob("__init__.py")
    ]
    assert len(folders) > 10
    mirroring_nothing = [
        f.relative_to(ROOT).as_posix()
        for f in folders
        if not (ROOT / owner(f / "x.py").replace(".", "/")).is_dir()
    ]
    assert mirroring_nothing == []


def imported_modules(path: Path, statements: list[ImportNode]) -> set[tuple[int, str]]:
    """Every module the file at ``path`` (holding these import statements) imports, by
    line: ``from a.b import c`` imports ``a.b.c`` when that is a module of ours (or a
    private name of a package), else ``a.b``."""
    package = module_name(path) if path.name == "__init__.py" else owner(path)
    found: set[tuple[int, str]] = set()
    for node in statements:
        if isinstance(node, ast.Import):
            found |= {(node.lineno, alias.name) for alias in node.names}
        else:
            base = node.module or ""
            if node.level:
                kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*kept, base]).strip(".")
            in_package = (ROOT / base.replace(".", "/")).is_dir()
            for alias in node.names:
                whole = f"{base}.{alias.name}"
                module = whole in MODULES or (in_package and alias.name.startswith("_"))
                found.add((node.lineno, whole if module else base))
    return found


def reaches(path: Path, statements: list[ImportNode]) -> list[str]:
    """The imports in ``path`` of a private module (``_name``) of a package it is not
    inside. A test counts as inside the package its folder mirrors, and may reach into
    the packages below that one (a test may import what it tests)."""
    here = owner(path)
    is_test = path.relative_to(ROOT).parts[0] == "tests"
    wrong = []
    for line, target in sorted(imported_modules(path, statements)):
        parts = target.split(".")
        private = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
        if not private or parts[0] not in ("runtime", "workers", "honeycomb"):
            continue
        holder = ".".join(parts[: private[0]])
        inside = here == holder or here.startswith(holder + ".")
        tested = is_test and holder.startswith(here + ".")
        if not inside and not tested:
            wrong.append(f"{path.relative_to(ROOT).as_posix()}:{line} imports {target}")
    return wrong


def test_the_import_statements_read_are_every_import_of_a_tree() -> None:
    nested = (
        "class A:\n    def f(self):\n        with x:\n            for i in y:\n"
        "                try:\n                    import a\n                except E:\n"
        "                    import b\n                else:\n                    import c\n"
        "                finally:\n                    import d\n"
        "match v:\n    case 1:\n        if w:\n            pass\n        else:\n"
        "            from e import f\n"
    )
    for source in (nested, MODULES["honeycomb.cli.main"].read_text()):
        tree = ast.walk(ast.parse(source))
        walked = sorted((n.lineno, n.col_offset) for n in tree if isinstance(n, ImportNode))
        assert [(n.lineno, n.col_offset) for n in import_statements(source)] == walked
        assert len(walked) > 4


def test_no_module_imports_a_private_module_of_another_package() -> None:
    wrong = [
        reach
        for source in ("runtime", "workers", "honeycomb", "tests", "benchmarks", "examples")
        for path in sorted((ROOT / source).rglob("*.py"))
        for reach in reaches(path, imports_in(path))
    ]
    assert wrong == []


@pytest.mark.parametrize(
    ("where", "source", "found"),
    [
        ("workers/x.py", "from runtime.tools import _mcp_sdk", "runtime.tools._mcp_sdk"),
        ("workers/x.py", "from runtime.tools import (Tool,\n _mcp_sdk)", "runtime.tools._mcp_sdk"),
        ("honeycomb/run/x.py", "import runtime.memory._sqlite", "runtime.memory._sqlite"),
        ("runtime/models/x.py", "from runtime.memory._sqlite import is_busy",
         "runtime.memory._sqlite"),
        ("tests/runtime/x.py", "from honeycomb.backends._wire import raised",
         "honeycomb.backends._wire"),
        ("benchmarks/x.py", "from runtime.tools._mcp_sdk import connect", "runtime.tools._mcp_sdk"),
        ("runtime/memory/x.py", "from runtime.memory._sqlite import is_busy", None),
        ("runtime/memory/x.py", "from ._sqlite import is_busy", None),
        ("runtime/tools/x.py", "from runtime.errors import _private_name", None),
        ("tests/honeycomb/x.py", "from honeycomb.backends._wire import raised", None),
        ("tests/honeycomb/backends/x.py", "from honeycomb.backends._wire import raised", None),
        ("tests/honeycomb/run/x.py", "from honeycomb.backends._wire import raised",
         "honeycomb.backends._wire"),
    ],
)  # fmt: skip
def test_a_reach_into_another_package_is_seen(where: str, source: str, found: str | None) -> None:
    expected = [] if found is None else [f"{where}:1 imports {found}"]
    assert reaches(ROOT / where, import_statements(source)) == expected


@pytest.mark.parametrize("module", [runtime, workers])
def test_all_names_exist_and_are_sorted(module: object) -> None:
    """(``honeycomb``'s public modules have tests of their own: test_public_api.py.)"""
    names = module.__all__  # type: ignore[attr-defined]
    assert names == sorted(names)
    for name in names:
        assert hasattr(module, name), name


# What `pip install honeycomb-agents` brings, by the module names the code imports.
BASE_MODULES = {
    "openai", "anyio", "msgspec", "pydantic", "pydantic_core", "structlog", "tenacity",
    "yaml", "rich",
}  # fmt: skip
EXTRA_MODULES = {  # each behind an extra
    "honeycomb/trace/otel.py": {"opentelemetry"},  # `otel`
    "runtime/memory/db.py": {"sqlite_vec"},  # `memory`
    "runtime/tools/_mcp_sdk.py": {"mcp", "httpx2", "jsonschema"},  # `mcp` (and what it brings)
    "runtime/models/llama_server.py": {"xllamacpp"},  # `local`, as a server starts
    "honeycomb/web/app.py": {"starlette"},  # `web`
    "honeycomb/web/approvals.py": {"starlette"},  # `web`
    "honeycomb/web/evals.py": {"starlette"},  # `web`
    "honeycomb/web/follow.py": {"starlette"},  # `web`
    "honeycomb/web/guard.py": {"starlette"},  # `web`
    "honeycomb/cli/serve.py": {"uvicorn"},  # `web`, imported when the command runs
    "honeycomb/cli/loop.py": {"uvloop"},  # `fast`, when it is installed
    "honeycomb/backends/ray.py": {"ray"},  # `ray`, once a RayBackend is used
    "honeycomb/backends/_setup.py": {"ray"},  # `ray`, as a role is installed in an actor
    "honeycomb/backends/_join.py": {"ray"},  # `ray`, as the backend starts
    "honeycomb/backends/_channel.py": {"ray"},  # `ray`, as it sends to an actor
    "honeycomb/cli/backend.py": {"ray"},  # `ray`, to shut down a Ray the command started
    "honeycomb/hive/backend.py": {"ray"},  # `ray`, to check a hive's runtime_env
    "honeycomb/store/postgres.py": {"psycopg", "psycopg_pool"},  # `postgresql`, for its stores
    "honeycomb/store/readers.py": {"psycopg", "psycopg_pool"},  # `postgresql`, its reads
    "honeycomb/store/silence.py": {"psycopg"},  # `postgresql`, to count a URL's hosts
    "honeycomb/store/watch.py": {"psycopg"},  # `postgresql`, its types only
    "honeycomb/evals/checks.py": {"jsonschema"},  # `evals`, by a check of a JSON schema
    "honeycomb/evals/spec.py": {"jsonschema"},  # `evals`, as a check's schema is read
    # `mcp` (jsonschema, and referencing with it), by a person's edit of an MCP tool's call
    "runtime/tools/define.py": {"jsonschema", "referencing"},
}


def test_the_library_imports_only_its_declared_dependencies() -> None:
    """The README's first command installs without the dev extra: a module that
    imports a package only the tests bring (httpx, say) would break it."""
    ours = {"runtime", "workers", "honeycomb"}
    problems = []
    for package in ours:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            allowed = BASE_MODULES | ours | EXTRA_MODULES.get(relative, set())
            for node in imports_in(path):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top not in allowed and top not in sys.stdlib_module_names:
                        problems.append(f"{relative}:{node.lineno} imports {name}")
    assert problems == []


def test_the_base_dependencies_are_declared() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~ \[]", d)[0].lower() for d in declared}
    assert names == {"openai", "anyio", "msgspec", "pydantic", "structlog", "tenacity",
                     "pyyaml", "rich"}  # fmt: skip


# What ``import honeycomb`` must not load: each loads with the first program that uses it.
LOADED_ON_FIRST_USE = (
    "openai", "tenacity", "yaml", "sqlite3", "difflib", "structlog", "anyio.streams.memory",
    "honeycomb.store", "honeycomb.run.record", "honeycomb.run.restore", "honeycomb.run.decide",
    "honeycomb.offline", "honeycomb.hive", "honeycomb.run.session",
    "runtime.config.yaml_config", "runtime.memory.db", "runtime.memory.sqlite", "sqlite_vec",
    "mcp", "mcp_types", "httpx2", "runtime.tools._mcp_sdk",
    # Every model adapter, the models that wrap others, the tool protocols, the test
    # models, spans and logging.
    "runtime.models.openai.chat", "runtime.models.openai.responses",
    "runtime.models.openai.embeddings", "runtime.models.openai.request",
    "runtime.models.pricing", "runtime.limits.ratelimit", "runtime.limits.quota",
    "runtime.limits.retry", "runtime.models.protocols.text_tools",
    "runtime.models.protocols.text_wire", "runtime.models.protocols.actions",
    "runtime.models.protocols.lenient_json", "runtime.models.protocols.json_tools",
    "runtime.testing", "runtime.models.llama", "runtime.models.llama_server", "xllamacpp",
    "runtime.models.cassettes", "runtime.models.layers.cassette", "runtime.models.request_diff",
    "runtime.models.cassette_keys", "runtime.models.cassette_errors",
    "runtime.models.cassette_writer", "runtime.models.layers.cassette_embeddings",
    "honeycomb.trace.spans", "honeycomb.trace.logs",
    # The table of Unicode's names, 0.3 MB of every process (benchmark E): a secret
    # written with \N{...} escapes has Python's decoder load it.
    "unicodedata",
    # A pydantic model made at import builds its validator, and pydantic then looks for
    # its plugins through importlib.metadata (about 15 ms: benchmark I).
    "pydantic.plugin._loader", "importlib.metadata",
)  # fmt: skip


def test_importing_honeycomb_loads_only_what_every_program_needs() -> None:
    probe = "import sys, honeycomb; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    loaded = set(done.stdout.split())
    assert {"honeycomb", "runtime", "workers", "anyio", "pydantic"} <= loaded
    assert sorted(m for m in LOADED_ON_FIRST_USE if m in loaded) == []


FIRST_USE_NAMES = [  # honeycomb's: see test_public_api.py
     ("runtime", "load_yaml"),
     ("runtime", "YamlDocument"), ("runtime", "format_path"), ("runtime", "OpenAIEmbeddings"),
     ("runtime", "LlamaModel"), ("runtime", "AdaptiveLimiter"), ("runtime", "SQLiteMemory"),
     ("runtime.memory", "SQLiteMemory")]  # fmt: skip


@pytest.mark.parametrize(("module", "name"), FIRST_USE_NAMES)
def test_names_that_load_on_first_use_are_there(module: str, name: str) -> None:
    value = getattr(sys.modules[module], name)
    assert value.__name__ == name


def test_the_command_line_loads_the_openai_adapter_only_for_an_openai_model() -> None:
    probe = "import sys, honeycomb.cli.main; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    loaded = set(done.stdout.split())
    assert "honeycomb.hive.hive" in loaded
    assert (
        sorted(m for m in ("openai", "tenacity", "runtime.models.openai.chat") if m in loaded) == []
    )


def named_modules() -> list[str]:
    """Every module this file names: each of ours it spells anywhere, and the
    third-party ones of its lists. A check about a module that does not exist cannot
    fail, so each must be there."""
    ours = re.compile(r"(runtime|workers|honeycomb)(\.\w+)*")
    spelt = {
        node.value
        for node in ast.walk(ast.parse(Path(__file__).read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and ours.fullmatch(node.value)
    }
    listed = {*LOADED_ON_FIRST_USE, *BASE_MODULES,
              *(m for modules in EXTRA_MODULES.values() for m in modules)}  # fmt: skip
    return sorted(spelt | listed)


@pytest.mark.parametrize("module", named_modules())
def test_every_module_this_file_names_exists(module: str) -> None:
    if module.split(".")[0] in ("runtime", "workers", "honeycomb"):
        assert module in MODULES
    else:
        assert importlib.util.find_spec(module) is not None


def test_every_file_this_file_names_exists() -> None:
    assert sorted(p for p in EXTRA_MODULES if not (ROOT / p).is_file()) == []


def pydantic_models() -> list[type[pydantic.BaseModel]]:
    """Every pydantic model the packages define."""
    found: list[type[pydantic.BaseModel]] = []
    for name in MODULES:
        if name.endswith("__main__"):
            continue  # it runs the command
        module = importlib.import_module(name)
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, pydantic.BaseModel)
            and value.__module__ == name
        ]
    return found


def test_models_with_fields_named_model_something_do_not_warn_at_the_pydantic_floor() -> None:
    # pydantic before 2.10 warns of every field starting with "model_" (its protected
    # namespace) unless the model turns the namespace off.
    models = pydantic_models()
    assert len(models) > 10
    warned = [
        f"{m.__module__}.{m.__qualname__}: {name}"
        for m in models
        for name in m.model_fields
        if name.startswith("model_") and m.model_config.get("protected_namespaces") != ()
    ]
    assert warned == []
