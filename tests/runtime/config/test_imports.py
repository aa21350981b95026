"""``import_object``: what an import path names, and errors that say where it failed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime import ConfigError
from runtime.config.imports import import_object, path_meant

TOOL_WITHOUT_TYPES = """from honeycomb import tool


def fine(city: str) -> str:
    return city


@tool
async def untyped(city):
    return city
"""


@pytest.mark.parametrize(
    ("source", "raised"),
    [
        (
            TOOL_WITHOUT_TYPES,
            "ToolDefinitionError: cannot make tool 'untyped': parameter 'city' has no type hint "
            "(refusing_tools.py, line 8)",
        ),
        (
            "x = 1\nraise RuntimeError('no config')\n",
            "RuntimeError: no config (refusing_tools.py, line 2)",
        ),
        (
            # It said "no module named 'requestz'" as if the path were misspelt, and
            # not which file imports it, nor where.
            "import os\nimport requestz\n",
            "ModuleNotFoundError: No module named 'requestz' (refusing_tools.py, line 2)",
        ),
    ],
)
def test_a_module_that_fails_as_it_is_imported_is_named_with_its_line(
    source: str, raised: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``@tool`` refused as its module is imported (a parameter without a type) is
    told with the line in the user's file, as a ``SyntaxError`` is: the error named the
    tool but not which file of the hive's to open, nor where."""
    (tmp_path / "refusing_tools.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "refusing_tools", raising=False)
    with pytest.raises(ConfigError) as caught:
        import_object("refusing_tools:fine")
    assert caught.value.message == (
        f"cannot import 'refusing_tools:fine': importing 'refusing_tools' raised {raised}"
    )


def test_a_syntax_error_names_its_line_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "unparsed_tools.py").write_text("def broken(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        import_object("unparsed_tools:broken")
    assert caught.value.message == (
        "cannot import 'unparsed_tools:broken': importing 'unparsed_tools' raised "
        "SyntaxError: invalid syntax (unparsed_tools.py, line 1)"
    )


def test_a_misspelt_module_or_name_is_told_with_the_one_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'tools:city_fact' said only that 'tools' has no attribute 'city_fact', and
    'tool:save_note' that there is no module 'tool', naming neither the function nor
    the module beside the hive that was meant."""
    (tmp_path / "near_tools.py").write_text("def city_facts(city: str) -> str:\n    return city\n")
    (tmp_path / "near_pkg").mkdir()
    (tmp_path / "near_pkg" / "__init__.py").write_text("")
    (tmp_path / "near_pkg" / "lookups.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("near_tools", "near_pkg", "near_pkg.lookups"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    said = {}
    for path in ("near_tools:city_fact", "near_tool:city_facts", "near_pkg.lookup:x"):
        with pytest.raises(ConfigError) as caught:
            import_object(path)
        said[path] = caught.value.message
    assert said == {
        "near_tools:city_fact": "cannot import 'near_tools:city_fact': 'near_tools' has no "
        "attribute 'city_fact' (did you mean 'city_facts'?)",
        "near_tool:city_facts": "cannot import 'near_tool:city_facts': no module named "
        "'near_tool' (did you mean 'near_tools'?)",
        "near_pkg.lookup:x": "cannot import 'near_pkg.lookup:x': no module named "
        "'near_pkg.lookup' (did you mean 'near_pkg.lookups'?)",
    }


def test_a_path_written_another_way_is_told_with_the_one_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's name (``tools.py:f``), the hive's folder before the module
    (``myhive.tools:f``), a dot for the colon (``tools.f``) or the bare function name
    were told there was no such module or tool, and not the path to write."""
    (tmp_path / "meant_tools.py").write_text("async def city_facts(city: str) -> str:\n    ...\n")
    (tmp_path / "broken.py").write_text("def (:\n")  # read past, never imported
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "meant_tools", raising=False)
    meant = "meant_tools:city_facts"
    assert path_meant("city_facts") == meant
    assert "meant_tools" not in sys.modules  # found by reading it, not by running it
    assert path_meant("meant_tools.city_facts") == meant
    for written in ("meant_tools.py:city_facts", "myhive.meant_tools:city_facts"):
        with pytest.raises(ConfigError) as caught:
            import_object(written)
        assert caught.value.message.endswith(f" (did you mean {meant!r}?)")
    assert path_meant("city_fact") is None  # no module defines it
    assert path_meant("elsewhere.tools:city_facts") is None  # no module of those names
    assert path_meant(meant) is None  # the path itself
