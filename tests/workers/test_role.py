"""Roles from Python and YAML; every YAML mistake names its file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import ConfigErrors, ToolRegistry, UnknownToolError, tool
from tests.support.role_tools import Summary
from workers import Role, load_roles


@tool
def search(query: str) -> str:
    """Search."""
    return query


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_one_role_per_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        "name: researcher\ninstructions: Find facts.\ntools: [search]\nmax_turns: 4\n",
    )
    roles = load_roles(path, registry=[search])
    assert roles["researcher"].max_turns == 4
    assert roles["researcher"].tools == ("search",)


def test_many_roles_per_file_and_import_paths(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "roles.yaml",
        """
roles:
  counter:
    instructions: Count.
    tools: [tests.support.role_tools:word_count, tests.support.role_tools:shout]
  summarizer:
    output_schema: tests.support.role_tools:Summary
""",
    )
    roles = load_roles(path)
    assert set(roles) == {"counter", "summarizer"}
    resolved = roles["counter"].resolve_tools()
    assert resolved.names == ("shout", "word_count")
    assert roles["summarizer"].resolve_output() is Summary


def test_a_folder_of_role_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "name: a\n")
    write(tmp_path, "b.yml", "b: {description: second}\n")
    write(tmp_path, "notes.txt", "not yaml: [")
    assert set(load_roles(tmp_path)) == {"a", "b"}


def test_every_mistake_is_reported_with_file_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        """roles:
  researcher:
    instructons: typo here
    max_turns: zero
    tools: [serch, tests.support.role_tools:nothing_here]
  writer:
    output_schema: tests.support.role_tools:NOT_A_MODEL
""",
    )
    with pytest.raises(ConfigErrors) as caught:
        load_roles(path, registry=[search])
    messages = [str(e) for e in caught.value.errors]
    text = "\n".join(messages)
    assert len(messages) == 5, text
    assert f"{path}:3:5: roles.researcher.instructons: unknown field 'instructons'" in text
    assert "(did you mean 'instructions'?)" in text
    assert f"{path}:4:5: roles.researcher.max_turns:" in text
    assert (
        f"{path}:5:13: roles.researcher.tools[0]: unknown tool 'serch' (did you mean 'search'?)"
        in text
    )
    assert "available: search" in text
    assert f"{path}:5:20: roles.researcher.tools[1]:" in text
    assert "has no attribute 'nothing_here'" in text
    assert f"{path}:7:5: roles.writer.output_schema:" in text
    assert "is not a pydantic model" in text


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yaml", "name: a\ntools: [x\n")
    # Where the unclosed bracket is, not the end of the file after it.
    with pytest.raises(ConfigErrors, match=rf"{path}:2:8: invalid YAML"):
        load_roles(path)


def test_role_defined_twice_across_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "name: twin\n")
    write(tmp_path, "b.yaml", "name: twin\n")
    with pytest.raises(ConfigErrors, match="role 'twin' is defined twice"):
        load_roles(tmp_path)


def test_resolve_tools_lists_the_valid_names() -> None:
    role = Role(name="r", tools=("nope",))
    with pytest.raises(UnknownToolError, match="available tools: search"):
        role.resolve_tools(ToolRegistry([search]))


def test_system_prompt_combines_name_description_and_instructions() -> None:
    role = Role(name="critic", description="Finds flaws.", instructions="Be brief.")
    assert role.system_prompt == "You are the critic worker.\n\nFinds flaws.\n\nBe brief."
