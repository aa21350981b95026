"""What loading a hive (``honeycomb validate``) accepts, ``Executor.from_hive`` builds
and a run can run; what building it would refuse, loading refuses first, located:
hives called as tools, tool names, and the roles of ``roles_dir`` checked as the
roles of the hive file are."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.hive import load_hive
from runtime import ToolRegistry
from tests.support.hives import errors_of, hive

FACTS = """\
name: facts
models: {default: offline}
roles:
  planner: {description: Plans.}
  checker: {description: Checks facts.}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def builds(path: Path) -> Executor:
    """The Executor of the hive at ``path``: it loads, and it builds."""
    return Executor.from_hive(load_hive(path))


def tools_of(executor: Executor, role: str) -> ToolRegistry:
    """The tools the workers of ``role`` call."""
    return executor.shared.crew.setup_for(executor.roles[role], None).tools


def test_a_hive_called_as_a_tool_without_a_planner_is_refused_in_its_own_file(
    tmp_path: Path,
) -> None:
    facts = write(tmp_path / "facts.yaml", FACTS.replace("  planner: {description: Plans.}\n", ""))
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          lead: {description: Leads., tools: ['hive:facts.yaml']}
        """,
    )
    assert errors_of(path) == [
        f"{facts}:3:1: roles: the hive has no planner, and 'hive:facts.yaml' of hive.yaml "
        "calls it as a tool, which plans each call's task: define a role named 'planner', "
        "or name one with planner:"
    ]

    facts.write_text(FACTS)
    assert "facts" in tools_of(builds(path), "lead")


def test_two_hive_files_of_one_name_are_refused_naming_both(tmp_path: Path) -> None:
    first = write(tmp_path / "a" / "facts.yaml", FACTS)
    second = write(tmp_path / "b" / "facts.yaml", FACTS)
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          lead_a: {description: Asks A., tools: ['hive:a/facts.yaml']}
          lead_b: {description: Asks B., tools: ['hive:b/facts.yaml']}
        """,
    )
    assert errors_of(path) == [
        f"{path}:5:42: roles.lead_b.tools[0]: 'hive:b/facts.yaml' ({second}) is a tool "
        f"named 'facts', as 'hive:a/facts.yaml' ({first}) is: a hive's tools need a name "
        "each (a hive tool is named after its file): rename one of the files"
    ]

    (tmp_path / "b" / "facts.yaml").rename(tmp_path / "b" / "checks.yaml")
    path.write_text(path.read_text().replace("b/facts.yaml", "b/checks.yaml"))
    assert "checks" in tools_of(builds(path), "lead_b")


def test_a_hive_tool_named_as_one_of_the_hives_tools_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "facts.yaml", FACTS)
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        tools: {facts: 'tests.support.role_tools:word_count'}
        roles:
          planner: {description: Plans.}
          counter: {description: Counts., tools: [facts]}
          lead: {description: Leads., tools: ['hive:facts.yaml']}
        """,
    )
    assert errors_of(path) == [
        f"{path}:6:39: roles.lead.tools[0]: 'hive:facts.yaml' is a tool named 'facts', as "
        "the hive's tools: facts is: a hive's tools need a name each (a hive tool is named "
        "after its file): rename the file, or that tool"
    ]


def test_one_hive_file_named_two_ways_is_one_tool(tmp_path: Path) -> None:
    write(tmp_path / "facts.yaml", FACTS)
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          lead: {description: Leads., tools: ['hive:facts.yaml']}
          second: {description: Seconds., tools: ['hive:./facts.yaml']}
        """,
    )
    executor = builds(path)
    assert tools_of(executor, "second")["facts"] is tools_of(executor, "lead")["facts"]


def test_two_tools_of_one_role_with_one_name_are_refused(tmp_path: Path) -> None:
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          word_count: {description: Counts words.}
          w:
            description: Works.
            tools: ['tests.support.role_tools:word_count', 'agent:word_count']
          twice:
            description: Works twice.
            tools: ['tests.support.role_tools:shout', 'tests.support.role_tools:shout']
          notes:
            description: Keeps notes.
            memory: {}
            tools: ['tests.support.role_tools:shout', 'agent:remember']
          remember: {description: Remembers.}
        memory: {path: memory.db}
        """,
    )
    assert errors_of(path) == [
        f"{path}:7:52: roles.w.tools[1]: 'agent:word_count' is a tool named 'word_count', "
        "as tools[0] ('tests.support.role_tools:word_count') is: the tools of a role need a "
        "name each; rename its role (an agent tool is named after its role)",
        f"{path}:10:47: roles.twice.tools[1]: 'tests.support.role_tools:shout' is listed "
        "twice (tools[0] too): remove one",
        f"{path}:14:47: roles.notes.tools[1]: 'agent:remember' is a tool named 'remember', "
        "as its memory's tool is: the tools of a role need a name each; rename its role (an "
        "agent tool is named after its role)",
    ]


ROLES_DIR_HIVE = """\
models: {default: offline}
roles_dir: roles
roles:
  planner: {description: Plans.}
"""


def test_a_roles_dir_role_is_checked_as_a_role_of_the_hive_file_is(tmp_path: Path) -> None:
    write(
        tmp_path / "roles" / "w.yaml",
        """\
w:
  description: Works.
  guards: {output: [ghostjudge]}
  tools: ['agent:nobody']
  memory: {}
""",
    )
    path = hive(tmp_path, ROLES_DIR_HIVE)
    role = tmp_path / "roles" / "w.yaml"
    assert errors_of(path) == [
        f"{role}:3:21: w.guards.output[0]: unknown judge role 'ghostjudge'; roles: w, "
        "planner (or write an import path 'module:name')",
        f"{role}:4:11: w.tools[0]: 'agent:nobody' names no role: roles are w, planner",
        f"{role}:5:3: w.memory: role 'w' has memory: but the hive declares no memory: add a "
        "top-level 'memory: {path: memory.db}'",
    ]

    inline = hive(tmp_path, ROLES_DIR_HIVE.replace("roles_dir: roles\n", ""))
    inline.write_text(inline.read_text() + "  w: {guards: {output: [ghostjudge]}}\n")
    assert errors_of(inline) == [
        f"{inline}:4:25: roles.w.guards.output[0]: unknown judge role 'ghostjudge'; roles: "
        "planner, w (or write an import path 'module:name')"
    ]


def test_a_roles_dir_roles_judge_that_is_a_role_builds(tmp_path: Path) -> None:
    write(tmp_path / "roles" / "w.yaml", "w: {guards: {output: [planner]}}\n")
    executor = builds(hive(tmp_path, ROLES_DIR_HIVE))
    guards = executor.roles["w"].guards
    assert guards is not None
    assert guards.output == ("planner",)


def test_the_model_sessions_summarize_with_must_be_one_of_the_hives(tmp_path: Path) -> None:
    text = ROLES_DIR_HIVE.replace("roles_dir: roles\n", "")
    path = hive(
        tmp_path, text + "policy: {sessions: {context: {model: nope, budget_tokens: 900}}}\n"
    )
    assert errors_of(path) == [
        f"{path}:4:31: policy.sessions.context.model: unknown model 'nope'; models: default"
    ]
    path.write_text(text + "policy: {sessions: {context: {model: default, budget_tokens: 900}}}\n")
    assert builds(path).policy.sessions.context.model == "default"


def test_a_conversation_budget_a_compacting_role_shown_it_cannot_hold_is_refused_located(
    tmp_path: Path,
) -> None:
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          writer:
            description: Writes the reply.
            session: summary
            compaction: {budget_tokens: 1000}
        policy:
          sessions: {context: {budget_tokens: 1000}}
        """,
    )
    assert errors_of(path) == [
        f"{path}:9:24: policy.sessions.context.budget_tokens: 1000 tokens of conversation "
        "leave no room in a request of role 'writer', shown the conversation, whose "
        "compaction budget (roles.writer.compaction.budget_tokens) holds 1000: give a "
        "budget below it (half of it leaves room for the prompt and the answer)"
    ]

    path.write_text(path.read_text().replace("budget_tokens: 1000}}", "budget_tokens: 500}}"))
    assert builds(path).policy.sessions.context.budget_tokens == 500


@pytest.mark.parametrize(
    "model",
    [
        "{provider: llama, context: 1024}",
        "{model: m, base_url: 'http://127.0.0.1:9/v1', context: 1024}",
    ],
    ids=["llama", "endpoint"],
)
def test_a_conversation_budget_its_models_context_cannot_hold_is_refused_located(
    tmp_path: Path, model: str
) -> None:
    # Loaded (honeycomb validate said OK), the hive was refused as it was built, by
    # `honeycomb chat` and `run`, without its file and line.
    path = hive(
        tmp_path,
        f"""\
        models:
          small: {model}
        roles:
          planner: {{description: Plans.}}
          writer: {{description: Writes the reply.}}
        policy:
          sessions: {{context: {{budget_tokens: 1024}}}}
        """,
    )
    assert errors_of(path) == [
        f"{path}:7:24: policy.sessions.context.budget_tokens: 1024 tokens of conversation "
        "leave no room in a call of model 'small', which holds 1024: give a budget below "
        "it (half of it leaves room for the prompt and the answer)"
    ]

    path.write_text(path.read_text().replace("budget_tokens: 1024}", "budget_tokens: 500}"))
    assert builds(path).policy.sessions.context.budget_tokens == 500
