"""A hive's import paths resolve in the hive's folder while it loads: the folder does not
stay on ``sys.path``, and hives in different folders with modules of the same names
(``tools.py``, and the ``helpers.py`` it imports) each get their own."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from honeycomb import ConfigErrors, Executor, GuardrailTripped
from honeycomb.hive import Hive, load_hive
from honeycomb.testing import ScriptedModel
from runtime import ToolMessage
from runtime.testing import call
from workers import WorkerSetup

HIVE = """\
models: {default: offline}
tools:
  lookup: tools:lookup
roles:
  finder:
    description: Finds.
    tools: [lookup, tools:where]
    output_schema: tools:Found
"""

TOOLS = '''\
from pydantic import BaseModel

from helpers import NAME

LOADS = []
LOADS.append(NAME)


def lookup(key: str) -> str:
    """Look a key up."""
    return f"{NAME}:{key}"


def where() -> str:
    """Which hive's tools these are."""
    return NAME


class Found(BaseModel):
    hive: str
    tools_of: str = NAME
'''


@pytest.fixture(autouse=True)
def _modules_put_back() -> Iterator[None]:
    """The modules these hives import leave with the test."""
    yield
    for name in ("tools", "helpers", "checks"):
        sys.modules.pop(name, None)


def hive_in(folder: Path, name: str) -> Path:
    folder.mkdir()
    (folder / "tools.py").write_text(TOOLS)
    (folder / "helpers.py").write_text(f"NAME = {name!r}\n")
    (folder / "hive.yaml").write_text(textwrap.dedent(HIVE))
    return folder / "hive.yaml"


def test_loading_a_hive_leaves_sys_path_as_it_was(tmp_path: Path) -> None:
    before = list(sys.path)
    hive = load_hive(hive_in(tmp_path / "a", "a"))
    assert sys.path == before
    assert hive.registry["lookup"].fn("k") == "a:k"  # imported, and still working


def test_two_hives_with_same_named_modules_each_load_their_own(tmp_path: Path) -> None:
    a = load_hive(hive_in(tmp_path / "a", "a"))
    b = load_hive(hive_in(tmp_path / "b", "b"))
    assert a.registry["lookup"].fn("k") == "a:k"
    assert b.registry["lookup"].fn("k") == "b:k"
    # The executors resolve the roles' own import paths (a tool, the output schema) in
    # their hive's folder, and their workers use what was resolved.
    for hive, name in ((a, "a"), (b, "b"), (a, "a")):
        setup = _setup(hive)
        assert setup.tools["where"].fn() == name
        assert setup.settings.output_type is not None
        assert setup.settings.output_type(hive="x").tools_of == name


def test_a_hive_loaded_again_reuses_the_modules_it_imported(tmp_path: Path) -> None:
    first = load_hive(hive_in(tmp_path / "a", "a"))
    load_hive(hive_in(tmp_path / "b", "b"))
    again = load_hive(tmp_path / "a" / "hive.yaml")
    # tools.py of a ran once: the same functions, not a second import of the file.
    assert again.registry["lookup"].fn is first.registry["lookup"].fn
    assert again.registry["lookup"].fn.__globals__["LOADS"] == ["a"]


async def test_two_hives_with_same_named_modules_each_run_their_own_tools(
    tmp_path: Path,
) -> None:
    hives = [load_hive(hive_in(tmp_path / n, n)) for n in ("a", "b")]
    for hive, name in zip(hives, ("a", "b"), strict=True):
        script = [call("lookup", {"key": "k"}), call("where"), f'{{"hive": "{name}"}}']
        result = await Executor.from_hive(hive, model=ScriptedModel(script)).run(
            "t", subtasks=[("finder", "find")]
        )
        (done,) = result.subtasks.values()
        assert done.worker is not None
        seen = [m.content for m in done.worker.transcript.messages if isinstance(m, ToolMessage)]
        assert seen == [f"{name}:k", name]
        assert done.worker.output.tools_of == name


def _setup(hive: Hive) -> WorkerSetup:
    executor = Executor.from_hive(hive)
    return executor.shared.crew.setup_for(executor.roles["finder"], None)


def test_a_hives_own_guards_resolve_in_its_folder_as_its_roles_do(tmp_path: Path) -> None:
    # A role's guard named `checks:refuse` was found beside the hive, the hive's own
    # `guards:` not: they were checked once its folder's imports had ended ("no module
    # named 'checks'"), in `validate` and `run` alike.
    (tmp_path / "checks.py").write_text("def refuse(check):\n    return 'not this answer'\n")
    hive_file = tmp_path / "hive.yaml"
    hive_file.write_text(
        "models: {default: offline}\n"
        "roles:\n"
        "  planner: {}\n"
        "  finder: {description: Finds.}\n"
        "  aggregator: {}\n"
        "guards:\n"
        "  output: [checks:refuse]\n"
    )
    hive = load_hive(hive_file)
    assert [str(ref) for ref in hive.spec.guards.output] == ["checks:refuse"]
    executor = Executor.from_hive(hive)
    with pytest.raises(GuardrailTripped, match="not this answer"):
        anyio.run(executor.run, "find it")


def test_a_tool_module_that_fails_is_run_and_told_once(tmp_path: Path) -> None:
    # Python forgets a module that failed: each path into it ran it again, its top-level
    # code and all, and the same failure was told once per path.
    runs = tmp_path / "runs.txt"
    (tmp_path / "tools.py").write_text(
        f"open({str(runs)!r}, 'a').write('ran\\n')\nraise RuntimeError('no config')\n"
    )
    (tmp_path / "hive.yaml").write_text(
        "models: {default: offline}\nroles:\n"
        "  finder: {description: Finds., tools: [tools:lookup, tools:where]}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(tmp_path / "hive.yaml")
    assert [e.message for e in caught.value.errors] == [
        "cannot import 'tools:lookup': importing 'tools' raised RuntimeError: no config "
        "(tools.py, line 2)",
        "cannot import 'tools:where': importing 'tools' failed, as the error of "
        "'tools:lookup' says",
    ]
    assert runs.read_text() == "ran\n"
    with pytest.raises(ConfigErrors):  # loaded again (the file fixed, say): run again
        load_hive(tmp_path / "hive.yaml")
    assert runs.read_text() == "ran\nran\n"


def test_a_declared_tool_that_cannot_be_made_is_told_where_it_is_declared_alone(
    tmp_path: Path,
) -> None:
    # Its role was told too: "unknown tool 'lookup'; available: none (or write an import
    # path ...)", as if the name were a typo of the role's.
    (tmp_path / "tools.py").write_text("def lookp(key: str) -> str:\n    return key\n")
    (tmp_path / "hive.yaml").write_text(
        "models: {default: offline}\ntools:\n  lookup: tools:lookup\nroles:\n"
        "  finder: {description: Finds., tools: [lookup]}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(tmp_path / "hive.yaml")
    [error] = caught.value.errors
    assert (error.field, error.message) == (
        "tools.lookup",
        "cannot import 'tools:lookup': 'tools' has no attribute 'lookup' (did you mean 'lookp'?)",
    )


@pytest.mark.parametrize(
    ("written", "told"),
    [
        ("lookup", "'lookup' is not an import path: write 'package.module:function' (did you "
         "mean 'tools:lookup'?)"),
        ("tools.lookup", "'tools.lookup' is not an import path: write "
         "'package.module:function' (did you mean 'tools:lookup'?)"),
        ("nothing", "'nothing' is not an import path: write 'package.module:function'"),
    ],
)  # fmt: skip
def test_a_name_in_tools_that_is_no_import_path_says_the_path_to_write(
    tmp_path: Path, written: str, told: str
) -> None:
    # It was told as a tool of an empty registry ("unknown tool 'lookup'; available
    # tools: none"), where tools: takes import paths, not names.
    (tmp_path / "tools.py").write_text("def lookup(key: str) -> str:\n    return key\n")
    (tmp_path / "hive.yaml").write_text(
        f"models: {{default: offline}}\ntools:\n  find: {written}\nroles:\n"
        "  finder: {description: Finds., tools: [find]}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(tmp_path / "hive.yaml")
    [error] = caught.value.errors
    assert (error.line, error.field, error.message) == (3, "tools.find", told)
