"""``honeycomb validate`` warns of a compacting role whose system prompt and tools'
schemas already take most of its ``compaction.budget_tokens`` (a worker of it fails
with ContextBudgetTooSmall), at the line of that budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Compaction, Executor, ModelRequest, Role, RunFailed
from honeycomb.cli.main import ExitStatus, main
from honeycomb.hive import load_hive
from honeycomb.testing import FunctionModel
from runtime import SystemMessage
from tests.support.hives import hive
from tests.support.role_tools import word_count
from workers.context import estimate_tokens
from workers.memory import RoleMemory, memory_schemas

LONG = "Check every figure twice. " * 40  # about 260 tokens of instructions

HIVE = f"""\
models:
  default: offline
  texty: {{provider: offline, tool_protocol: text}}
mcp_servers:
  files: {{command: files-server}}
roles:
  planner: {{description: Plans.}}
  roomy:
    instructions: {LONG}
    compaction: {{budget_tokens: 4000}}
  tight:
    instructions: {LONG}
    tools: [tests.support.role_tools:word_count]
    compaction:
      budget_tokens: 600
  over:
    instructions: {LONG}
    tools: [tests.support.role_tools:word_count, "files:*"]
    compaction: {{budget_tokens: 256}}
  written:
    model: texty
    tools: [tests.support.role_tools:word_count]
    compaction: {{budget_tokens: 256}}
"""


def tokens(name: str, instructions: str, tools: bool) -> int:
    """What a worker of the role is sent in every request, by the estimate compaction
    uses: its system prompt and its Python tools' schemas."""
    prompt = Role(name=name, instructions=instructions).system_prompt
    schemas = [word_count.schema] if tools else []
    return estimate_tokens([SystemMessage(content=prompt)], schemas)


def test_a_role_whose_prompt_and_tools_take_most_of_its_budget_is_warned_of(
    tmp_path: Path,
) -> None:
    path = hive(tmp_path, HIVE)
    warnings = [str(w) for w in load_hive(path).small_budgets()]
    tight, over = tokens("tight", LONG, True), tokens("over", LONG, True)
    assert 300 < tight < 600  # over half the budget, not all of it
    assert warnings[:2] == [
        f"{path}:15:7: roles.tight.compaction.budget_tokens: its system prompt and tools' "
        f"schemas take about {tight:,} tokens, over half its compaction budget of 600: the "
        "rest must hold the task, the summary of older turns and the newest turn's calls "
        "and results, and a worker that cannot fit them fails with ContextBudgetTooSmall; "
        f"raise budget_tokens to {2 * tight:,} or more, or give the role fewer tools",
        f"{path}:19:18: roles.over.compaction.budget_tokens: its system prompt and tools' "
        f"schemas take about {over:,} tokens (not counting the tools of MCP server files, "
        "known once they start, which take more), as much as its whole compaction budget "
        "of 256 or more: every worker of the role fails with ContextBudgetTooSmall before "
        f"its first model call; raise budget_tokens to {2 * over:,} or more, or give the "
        "role fewer tools",
    ]
    # Under the text protocol the tools are written into the prompt, and take more:
    # counted as the model is sent them, 'written' is over half its budget too.
    assert tokens("written", "", True) <= 128
    (written,) = warnings[2:]
    assert written.startswith(f"{path}:23:18: roles.written.compaction.budget_tokens: ")


SMALL = f"""\
models:
  default: offline
roles:
  planner: {{description: Plans.}}
  tight:
    instructions: {LONG}
    tools: [tests.support.role_tools:word_count]
    compaction: {{budget_tokens: 600}}
"""


def test_validate_prints_the_warning_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hive(tmp_path, SMALL)
    assert main(["validate", str(path)]) == ExitStatus.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: OK (2 roles, 1 model)"
    assert out[1].startswith(f"  warning: {path}:8:18: roles.tight.compaction.budget_tokens: ")
    assert len(out) == 2


async def test_a_role_so_warned_of_does_fail_as_the_warning_says() -> None:
    calls: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        calls.append(request)
        return "done"

    role = Role(name="over", instructions=LONG, compaction=Compaction(budget_tokens=256))
    with pytest.raises(RunFailed) as caught:
        await Executor([role], FunctionModel(answer)).run("Go.", subtasks=[("over", "Add.")])
    assert caught.value.partial is not None
    error = caught.value.partial.subtasks["s1"].error
    assert error is not None
    assert error.type == "ContextBudgetTooSmall"
    assert calls == []  # before its first model call


REMEMBERING = """\
models:
  default: offline
memory: {path: memory.db}
roles:
  planner: {description: Plans.}
  keeper:
    memory: {remember: true}
    compaction: {budget_tokens: 400}
  recaller:
    memory: {remember: false}
    compaction: {budget_tokens: 400}
"""


def test_the_memory_tools_a_role_is_given_count_in_the_warning(tmp_path: Path) -> None:
    """A role's ``memory: {remember: true}`` gives its workers the ``recall`` and
    ``remember`` tools, whose schemas every request holds: left out, a role they took
    most of the budget of passed validate, and its workers failed at run time with
    ContextBudgetTooSmall."""
    path = hive(tmp_path, REMEMBERING)
    prompt = [SystemMessage(content=Role(name="keeper").system_prompt)]
    bare = estimate_tokens(prompt)
    taken = estimate_tokens(prompt, memory_schemas(RoleMemory(), "keeper"))
    assert bare < 200 < taken < 400  # the tools alone take it over half of 400
    warnings = [str(w) for w in load_hive(path).small_budgets()]
    assert warnings == [
        f"{path}:8:18: roles.keeper.compaction.budget_tokens: its system prompt and tools' "
        f"schemas take about {taken:,} tokens, over half its compaction budget of 400: the "
        "rest must hold the task, the summary of older turns and the newest turn's calls "
        "and results, and a worker that cannot fit them fails with ContextBudgetTooSmall; "
        f"raise budget_tokens to {2 * taken:,} or more, or give the role fewer tools",
    ]
