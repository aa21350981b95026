"""MCP servers in a hive: ``mcp_servers:`` (stdio and streamable HTTP, secrets from
``${ENV}``), roles naming ``server:tool`` and ``server:*``, per-tool overrides, and
``honeycomb validate`` starting each server to check the tools the roles name. The
servers are real subprocesses: the third-party ``mcp-server-time`` and the
SDK-written server of ``tests/support/mcp_server.py``."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from honeycomb import ConfigErrors, Executor, Subtask, ToolMessage
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from honeycomb.testing import ScriptedModel
from runtime.testing import call
from tests.support.mcp_servers import ROOT, child_pids, http_test_server

pytestmark = pytest.mark.timeout(120)

TIME_HIVE = """\
models: {default: offline}
mcp_servers:
  time: {command: python, args: [-m, mcp_server_time]}
roles:
  planner: {description: Plans.}
  clock:
    description: Tells the time in one place.
    tools: [time:get_current_time]
  traveller:
    description: Converts a time from one place to another.
    tools: [time:*]
  aggregator: {description: Merges.}
"""

PLAN = json.dumps(
    {
        "subtasks": [
            {"id": "s1", "role": "clock", "instruction": "What time is it in Tokyo?"},
            {"id": "s2", "role": "traveller", "instruction": "Noon in UTC, in Lisbon?"},
        ]
    }
)


@pytest.fixture
def python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python`` is the interpreter running the tests (where ``mcp-server-time`` is
    installed), as it is in an activated virtual environment."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{Path('/usr/bin')}")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hive.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def seen(result: object, subtask: str) -> list[ToolMessage]:
    worker = result.subtasks[subtask].worker  # type: ignore[attr-defined]
    return [m for m in worker.transcript.messages if isinstance(m, ToolMessage)]


@pytest.mark.usefixtures("python_on_path")
async def test_a_hive_using_the_third_party_time_server_runs_end_to_end(tmp_path: Path) -> None:
    before = child_pids()
    convert = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Lisbon"}
    model = ScriptedModel(
        {
            "r/planner": [PLAN],
            "r/s1": [call("get_current_time", {"timezone": "Asia/Tokyo"}), "It is night."],
            "r/s2": [call("convert_time", convert), "Noon in Lisbon too."],
            "r/aggregator": ["Night in Tokyo; noon in Lisbon."],
        }
    )
    async with Executor.from_hive(load_hive(write(tmp_path, TIME_HIVE)), model=model) as hive:
        result = await hive.run("Tokyo's time, and UTC noon in Lisbon", run_id="r")
        assert len(child_pids() - before) == 1  # one server for both workers
    assert child_pids() - before == set()
    assert result.status == "ok"
    assert result.answer == "Night in Tokyo; noon in Lisbon."
    (tokyo,) = seen(result, "s1")
    assert tokyo.status == "ok"
    assert json.loads(tokyo.content)["timezone"] == "Asia/Tokyo"
    (noon,) = seen(result, "s2")
    assert noon.status == "ok"
    converted = json.loads(noon.content)
    assert converted["target"]["timezone"] == "Europe/Lisbon"
    # time:get_current_time is one tool; time:* is all the server lists.
    (asked,) = model.requests_for("r/s1")[:1]
    assert [t.name for t in asked.tools] == ["get_current_time"]
    assert {t.name for t in model.requests_for("r/s2")[0].tools} == {
        "get_current_time",
        "convert_time",
    }
    catalog = str(model.requests_for("r/planner")[0].messages[-1].content)
    assert "tool convert_time:" in catalog


async def test_a_stdio_server_runs_with_its_env_and_cwd_and_nothing_else_inherited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GREETING", "hello from the environment")
    monkeypatch.setenv("MCP_TEST_PARENT_ONLY", "not for the server")
    (tmp_path / "work").mkdir()
    path = write(
        tmp_path,
        f"""\
        models: {{default: offline}}
        mcp_servers:
          t:
            command: {sys.executable}
            args: [-m, tests.support.mcp_server]
            env: {{PYTHONPATH: {ROOT}, MCP_TEST_GREETING: "${{GREETING}}"}}
            cwd: work
        roles:
          finder: {{description: Finds., tools: ["t:where"]}}
        """,
    )
    model = ScriptedModel([call("where"), "found"])
    executor = Executor.from_hive(load_hive(path), model=model)
    result = await executor.run("t", subtasks=[Subtask(id="s1", role="finder", instruction="go")])
    (where,) = seen(result, "s1")
    # An env value is a secret: the server saw it whole, and the result masks it.
    assert json.loads(where.content) == {
        "cwd": str(tmp_path / "work"),
        "MCP_TEST_GREETING": "[secret hidden]",
        "MCP_TEST_PARENT_ONLY": None,
    }


async def test_a_streamable_http_server_with_a_secret_header_and_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTES_TOKEN", "t0ken-from-env")
    with http_test_server("t0ken-from-env") as url:
        monkeypatch.setenv("NOTES_URL", url)
        path = write(
            tmp_path,
            """\
            models: {default: offline}
            mcp_servers:
              notes:
                url: ${NOTES_URL}
                headers: {Authorization: "Bearer ${NOTES_TOKEN}"}
                tools:
                  lookup: {side_effects: true, timeout: 2}
                  append_note: {side_effects: false, exclusive: notes}
                  picture: {idempotent: true}
            roles:
              clerk: {description: Writes notes., tools: ["notes:*"]}
            """,
        )
        hive = load_hive(path)
        assert "t0ken-from-env" not in repr(hive.spec)
        assert "t0ken-from-env" not in repr(hive.mcp_servers)
        model = ScriptedModel([call("lookup", {"word": "bee"}), "done"])
        async with Executor.from_hive(hive, model=model) as executor:
            result = await executor.run(
                "t", subtasks=[Subtask(id="s1", role="clerk", instruction="look")]
            )
    (looked,) = seen(result, "s1")
    assert (looked.status, looked.content) == ("ok", "an insect that makes honey")
    tools = executor.shared.crew.setup_for(executor.roles["clerk"], None).tools
    lookup, note, picture = tools["lookup"], tools["append_note"], tools["picture"]
    flag = tools["set_flag"]
    assert (lookup.side_effects, lookup.timeout) == (True, 2)  # read-only, made serial
    # An exclusive key makes it serial whatever side_effects says.
    assert (note.side_effects, note.exclusive) == (True, "notes")
    assert (picture.side_effects, picture.idempotent) == (False, True)
    assert (flag.side_effects, flag.idempotent) == (True, True)  # as its hints say


def test_validate_starts_each_server_and_counts_its_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python_on_path: None
) -> None:
    path = write(tmp_path, TIME_HIVE)
    before = child_pids()
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: OK (4 roles, 1 model, MCP server time: 2 tools)\n"
    assert child_pids() - before == set()


def test_validate_names_each_tool_a_server_lacks_with_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python_on_path: None
) -> None:
    path = write(
        tmp_path,
        """\
        models: {default: offline}
        mcp_servers:
          time:
            command: python
            args: [-m, mcp_server_time]
            tools:
              convert_tim: {side_effects: true}
        roles:
          planner: {description: Plans.}
          clock: {tools: ["time:get_curent_time", "time:*"]}
        """,
    )
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{path}: 2 errors",
        f"  {path}:7:7: mcp_servers.time.tools.convert_tim: MCP server 'time' has no tool "
        "'convert_tim' (did you mean 'convert_time'?); its tools: convert_time, "
        "get_current_time",
        f"  {path}:10:19: roles.clock.tools[0]: MCP server 'time' has no tool "
        "'get_curent_time' (did you mean 'get_current_time'?); its tools: convert_time, "
        "get_current_time",
    ]


def test_validate_checks_the_servers_of_the_hives_called_as_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python_on_path: None
) -> None:
    """A hive called as a tool (``hive:PATH``) starts its own servers as it runs:
    validate lists their tools too, and names a tool they lack in the called file (it
    said OK, and the run failed)."""
    (tmp_path / "clock.yaml").write_text(
        textwrap.dedent(
            """\
            models: {default: offline}
            mcp_servers:
              time: {command: python, args: [-m, mcp_server_time]}
            roles:
              planner: {description: Plans.}
              clock: {tools: ["time:get_curent_time"]}
            """
        ),
        encoding="utf-8",
    )
    path = write(
        tmp_path,
        """\
        models: {default: offline}
        roles:
          planner: {description: Plans.}
          lead: {tools: ["hive:clock.yaml"]}
        """,
    )
    before = child_pids()
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{path}: 1 error",
        f"  {tmp_path / 'clock.yaml'}:6:19: roles.clock.tools[0]: MCP server 'time' has no "
        "tool 'get_curent_time' (did you mean 'get_current_time'?); its tools: "
        "convert_time, get_current_time",
    ]
    assert child_pids() - before == set()


def test_validate_refuses_a_role_taking_two_servers_tools_of_one_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python_on_path: None
) -> None:
    """As a run refuses it: validate said OK."""
    path = write(
        tmp_path,
        """\
        models: {default: offline}
        mcp_servers:
          a: {command: python, args: [-m, mcp_server_time]}
          b: {command: python, args: [-m, mcp_server_time]}
        roles:
          planner: {description: Plans.}
          clock: {tools: ["a:*", "b:*"]}
          watch: {tools: ["a:get_current_time", "b:get_current_time"]}
        """,
    )
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}: 2 errors",
        f"  {path}:7:26: roles.clock.tools[1]: MCP servers 'a' and 'b' both have a tool "
        "'get_current_time': name the one the role is to have (a:get_current_time or "
        "b:get_current_time), not every tool of both (server:*)",
        f"  {path}:8:41: roles.watch.tools[1]: MCP servers 'a' and 'b' both have a tool "
        "'get_current_time': the role can take one of them only (a:get_current_time or "
        "b:get_current_time)",
    ]


def test_validate_refuses_an_mcp_tool_of_the_name_of_an_agent_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python_on_path: None
) -> None:
    """As a run refuses it (its workers fail as they start): validate said OK. A role
    with memory keeps its own recall and remember, of no MCP tool's name here."""
    path = write(
        tmp_path,
        """\
        models: {default: offline}
        memory: {path: memory.db}
        mcp_servers:
          time: {command: python, args: [-m, mcp_server_time]}
        roles:
          planner: {description: Plans.}
          convert_time: {description: Converts.}
          clock: {tools: ["time:*", "agent:convert_time"]}
          keeper: {tools: ["time:get_current_time"], memory: {remember: true}}
        """,
    )
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}: 1 error",
        f"  {path}:8:19: roles.clock.tools[0]: its own tool 'convert_time' and MCP server "
        "'time''s have one name: give its own another (a function's with @tool(name=...); "
        "an agent or hive tool has its role's or file's), or name the server's tools it is "
        "to have one by one, without that one (not time:*)",
    ]


def test_validate_names_approvals_of_tools_no_role_has_once_the_servers_list_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], python_on_path: None
) -> None:
    # A role using MCP tools was not checked: validate said OK and a run failed the
    # role's workers as they started (or, for the hive's, the name never asked).
    (tmp_path / "roles").mkdir()
    (tmp_path / "roles" / "traveller.yaml").write_text(
        "traveller:\n  tools: [time:convert_time]\n  approvals: {tools: [convrt_time]}\n",
        encoding="utf-8",
    )
    path = write(
        tmp_path,
        """\
        models: {default: offline}
        mcp_servers:
          time: {command: python, args: [-m, mcp_server_time]}
        approvals: {tools: [get_current_tme]}
        roles_dir: roles
        roles:
          planner: {description: Plans.}
          clock:
            tools: [time:get_current_time]
            approvals: {tools: [get_current_time, convert_time]}
        """,
    )
    assert main(["validate", str(path)]) == 1
    traveller = tmp_path / "roles" / "traveller.yaml"
    assert capsys.readouterr().out.splitlines() == [
        f"{path}: 3 errors",
        f"  {path}:4:21: approvals.tools[0]: approvals names tool 'get_current_tme' (did you "
        "mean 'get_current_time'?), which no role of the hive uses; its tools: "
        "convert_time, get_current_time",
        f"  {path}:10:43: roles.clock.approvals.tools[1]: approvals names tool 'convert_time', "
        "which the role does not use; its tools: get_current_time",
        f"  {traveller}:3:23: traveller.approvals.tools[0]: approvals names tool "
        "'convrt_time' (did you mean 'convert_time'?), which the role does not use; its "
        "tools: convert_time",
    ]
    # Spelt right, the same hive is valid.
    path.write_text(
        path.read_text(encoding="utf-8")
        .replace("get_current_tme", "get_current_time")
        .replace(", convert_time]", "]"),
        encoding="utf-8",
    )
    (tmp_path / "roles" / "traveller.yaml").write_text(
        "traveller:\n  tools: [time:convert_time]\n  approvals: {tools: [convert_time]}\n",
        encoding="utf-8",
    )
    assert main(["validate", str(path)]) == 0


def test_validate_says_why_a_server_does_not_start_and_never_shows_its_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTES_TOKEN", "wr0ng-t0ken")
    with http_test_server("the-right-one") as url:
        path = write(
            tmp_path,
            f"""\
            models: {{default: offline}}
            mcp_servers:
              notes:
                url: {url}
                headers: {{Authorization: "Bearer ${{NOTES_TOKEN}}"}}
              gone: {{command: no-such-mcp-server-command, env: {{TOKEN: "${{NOTES_TOKEN}}"}}}}
            roles:
              planner: {{description: Plans.}}
              clerk: {{tools: ["notes:lookup", "gone:*"]}}
            """,
        )
        assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "wr0ng-t0ken" not in out
    assert out.splitlines() == [
        f"{path}: 2 errors",
        f"  {path}:3:3: mcp_servers.notes: MCP server 'notes' could not be started: Server "
        "returned an error response (HTTP 401 Unauthorized)",
        f"  {path}:6:3: mcp_servers.gone: MCP server 'gone' cannot be started: [Errno 2] No "
        "such file or directory: 'no-such-mcp-server-command'",
    ]


def test_a_role_naming_a_server_without_a_tool_or_an_undeclared_one(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        models: {default: offline}
        mcp_servers:
          time: {command: python, args: [-m, mcp_server_time]}
        roles:
          clock: {tools: ["time:", "tme:*"]}
        """,
    )
    with pytest.raises(ConfigErrors) as info:
        load_hive(path)
    errors = [str(e) for e in info.value.errors]
    assert errors[0] == (
        f"{path}:5:19: roles.clock.tools[0]: 'time:' names the MCP server 'time' but no "
        "tool: write 'time:TOOL', or 'time:*' for all of its tools"
    )
    assert errors[1] == (
        f"{path}:5:28: roles.clock.tools[1]: cannot import 'tme:*': no module named 'tme'; "
        "'tme' is not a declared MCP server (did you mean 'time'?), so 'tme:*' is read as "
        "an import path (MCP servers: time)"
    )


@pytest.mark.parametrize(
    ("approvals", "writer", "reporter"),
    [
        ("{default: ask}", ((), "ask"), ((), "ask")),
        # The writer's MCP tools are known once its server lists them: it gets every
        # name, as it may use any; the reporter, those of its own it names.
        ("{tools: [append_note, get_weather]}", (("append_note", "get_weather"), "allow"),
         (("get_weather",), "allow")),
    ],
)  # fmt: skip
def test_the_hives_approvals_reach_every_role_when_one_uses_an_mcp_server(
    tmp_path: Path,
    approvals: str,
    writer: tuple[tuple[str, ...], str],
    reporter: tuple[tuple[str, ...], str],
) -> None:
    # A role using an MCP tool made the hive drop its approvals for every role.
    hive = load_hive(
        write(
            tmp_path,
            f"""
            models: {{default: offline}}
            mcp_servers:
              t: {{command: {sys.executable}, args: [-m, tests.support.mcp_server]}}
            roles:
              writer: {{tools: ["t:append_note"]}}
              reporter: {{tools: ["tests.support.weather_tools:get_weather"]}}
            approvals: {approvals}
            """,
        )
    )
    given = {name: hive.roles[name].approvals for name in ("writer", "reporter")}
    assert {n: (a.tools, a.default) for n, a in given.items() if a is not None} == {
        "writer": writer,
        "reporter": reporter,
    }


def test_validate_shows_the_settings_a_server_s_env_holds_and_hides_its_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variable that holds a setting (``PYTHONPATH``) is no secret: what a server that
    fails says of it is shown, as a run shows it (it was masked, the path of the folder
    the server was told to look in with it). Its token is still hidden."""
    monkeypatch.setenv("LOOKUP_TOKEN", "the-lookup-token")
    lib = tmp_path / "server-lib"
    say = (
        "import os, sys; e = os.environ; "
        "sys.exit('no server in ' + e['PYTHONPATH'] + ' for ' + e['T'])"
    )
    path = write(
        tmp_path,
        f"""\
        models: {{default: offline}}
        mcp_servers:
          lookup:
            command: {sys.executable}
            args: [-c, "{say}"]
            env: {{PYTHONPATH: {lib}, T: "${{LOOKUP_TOKEN}}"}}
        roles:
          planner: {{description: Plans.}}
          clerk: {{tools: ["lookup:*"]}}
        """,
    )
    assert main(["validate", str(path)]) == 1
    assert capsys.readouterr().out.splitlines()[1] == (
        f"  {path}:3:3: mcp_servers.lookup: MCP server 'lookup' could not be started: "
        f"it exited with status 1 before it listed its tools (it said: no server in {lib} for "
        "[secret hidden])"
    )


def test_a_server_s_name_other_than_its_key_is_told_at_its_line(tmp_path: Path) -> None:
    # name: time under the key clock was dropped unsaid: the roles' time:... tools were
    # then unknown, with no word of the name written.
    path = write(tmp_path, TIME_HIVE.replace("  time: {command:", "  time: {name: clock, command:"))
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    (error,) = caught.value.errors
    assert str(error) == (
        f"{path}:3:10: mcp_servers.time.name: name 'clock' differs from key 'time': the key "
        "names the server (roles name its tools time:TOOL); leave name: out, or rename the key"
    )
    same = write(tmp_path, TIME_HIVE.replace("  time: {command:", "  time: {name: time, command:"))
    assert [server.name for server in load_hive(same).mcp_servers] == ["time"]


async def test_a_stdio_server_s_command_and_cwd_under_home_are_in_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # command: ~/bin/py was run as a program named '~/bin/py' (no such file), and
    # cwd: ~/work was a folder named '~' beside the hive file.
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / "work").mkdir()
    program = home / "bin" / "py"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    program.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    path = write(
        tmp_path,
        f"""\
        models: {{default: offline}}
        mcp_servers:
          t:
            command: ~/bin/py
            args: [-m, tests.support.mcp_server]
            env: {{PYTHONPATH: {ROOT}}}
            cwd: ~/work
        roles:
          finder: {{description: Finds., tools: ["t:where"]}}
        """,
    )
    model = ScriptedModel([call("where"), "found"])
    executor = Executor.from_hive(load_hive(path), model=model)
    result = await executor.run("t", subtasks=[Subtask(id="s1", role="finder", instruction="go")])
    (where,) = seen(result, "s1")
    assert json.loads(where.content)["cwd"] == str(home / "work")
