"""``import_object``: what an import path names, and errors that say where it failed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime import ConfigError
from runtime.config.imports import import_object

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
