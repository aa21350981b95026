"""The text tool protocol from the hive and the command line: the demo hive end to
end on a model without function calling (the local server refusing tools, answering
as the offline model would from the text alone), ``tool_protocol:`` and ``api:`` on
a hive's model, and the documented Ollama command."""

from __future__ import annotations

import functools
import socket
import textwrap
from pathlib import Path
from typing import Any

import pytest

from honeycomb import ConfigErrors, Executor, OfflineModel
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from honeycomb.models import TextToolModel
from runtime import OpenAIModel, OpenAIResponsesModel, RetryPolicy
from tests.honeycomb.run.test_openai_loops import responses_agent
from tests.support.openai_server import OpenAIServer
from tests.support.tool_less import offline_answer, spy_on, tool_less

DOCUMENTED = ["demo", "--model", "llama3.1:8b", "--base-url", "http://localhost:11434/v1",
              "--tool-protocol", "text"]  # fmt: skip


def test_the_demo_runs_end_to_end_on_a_model_without_function_calling(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with OpenAIServer(tool_less(offline_answer)) as server:
        argv = [*DOCUMENTED[:-4], "--base-url", server.base_url, "--tool-protocol", "text"]
        code = main([*argv, "--plain", "--no-store"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "\nAnswer:\n[offline simulation]" in out
    assert "Lisbon" in out
    bodies: list[dict[str, Any]] = [r.body for r in server.requests]
    assert all("tools" not in b and "tool_choice" not in b for b in bodies)
    assert all(m["role"] != "tool" for b in bodies for m in b["messages"])
    # the workers were told their tools as text and read their observations as text
    systems = [b["messages"][0]["content"] for b in bodies if b["messages"][0]["role"] == "system"]
    assert any('"name": "get_weather"' in s for s in systems)
    users = [m["content"] for b in bodies for m in b["messages"] if m["role"] == "user"]
    assert any(u.startswith("Observation for ") and "(get_weather)" in u for u in users)
    assert any("(send_to_outbox)" in u for u in users)
    assert len(list(fast_demo.glob("*.md"))) == 1  # the side-effecting call ran once


def test_the_demo_with_only_tool_protocol_runs_the_offline_model_through_the_text_protocol(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = spy_on(monkeypatch, TextToolModel)
    assert main(["demo", "--plain", "--latency", "0", "--tool-protocol", "text"]) == 0
    assert "\nAnswer:\n[offline simulation]" in capsys.readouterr().out
    assert all(isinstance(inner, OfflineModel) for inner, _ in seen)
    assert sum(len(r.message.tool_calls) for _, r in seen) >= 4  # read back from text
    assert len(list(fast_demo.glob("*.md"))) == 1


def test_the_documented_ollama_command_parses_and_an_unreachable_server_is_said_plainly(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a port nothing listens on, as when Ollama is not running
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    once = functools.partial(OpenAIModel, retry=RetryPolicy(attempts=1))
    monkeypatch.setattr("runtime.models.openai.chat.OpenAIModel", once)
    argv = [a.replace("localhost:11434", f"127.0.0.1:{port}") for a in DOCUMENTED]
    assert main([*argv, "--plain", "--no-store"]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "invalid plan" not in out + err  # a transport error is not a bad plan
    assert f"run failed: cannot reach the model endpoint (http://127.0.0.1:{port}/v1)" in out + err


def hive(tmp_path: Path, models: str) -> Path:
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models:\n"
        + textwrap.indent(textwrap.dedent(models), "  ")
        + "roles:\n  researcher:\n    description: Researches.\n"
        + "    tools: ['tests.honeycomb.run.test_openai_loops:lookup']\n"
    )
    return path


def test_a_hive_model_says_its_api_and_tool_protocol(tmp_path: Path) -> None:
    path = hive(
        tmp_path,
        """\
        chat: {model: llama3.1:8b, base_url: 'http://127.0.0.1:9/v1', tool_protocol: text}
        responses: {model: o4-mini, base_url: 'http://127.0.0.1:9/v1', api: responses}
        local: {provider: offline, tool_protocol: text}
        default: offline
        """,
    )
    # Each built as declared (a hive builds only those its roles use).
    models = {name: spec.build() for name, spec in load_hive(path).spec.models.items()}
    chat, local = models["chat"], models["local"]
    assert isinstance(chat, TextToolModel)
    assert type(chat.inner) is OpenAIModel
    assert type(models["responses"]) is OpenAIResponsesModel
    assert isinstance(local, TextToolModel)
    assert isinstance(local.inner, OfflineModel)
    assert isinstance(models["default"], OfflineModel)


def test_a_wrong_api_or_tool_protocol_is_named_at_its_line(tmp_path: Path) -> None:
    path = hive(
        tmp_path,
        """\
        a: {model: m, api: completions}
        b: {model: m, tool_protocol: grammar}
        c: {provider: offline, api: responses}
        """,
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    errors = [str(e) for e in caught.value.errors]
    assert any(e.startswith(f"{path}:2:") and "models.a.api" in e for e in errors), errors
    assert any("'chat' or 'responses'" in e for e in errors), errors
    assert any(e.startswith(f"{path}:3:") and "models.b.tool_protocol" in e for e in errors)
    assert any("'api: responses' is for an openai model" in e for e in errors), errors


async def test_a_hive_with_api_responses_runs_over_http(tmp_path: Path) -> None:
    with OpenAIServer(responses_agent) as server:
        path = hive(
            tmp_path,
            f"default: {{model: o4-mini, base_url: '{server.base_url}', api: responses}}\n",
        )
        executor = Executor.from_hive(load_hive(path))
        result = await executor.run("research", subtasks=[("researcher", "part 1")])
    assert result.status == "ok", [str(f.error) for f in result.failures]
    assert [s.text for s in result.subtasks.values()] == ["done: part 1"]
    assert {r.path for r in server.requests} == {"/v1/responses"}
    first = server.requests[0].body
    assert [(t["type"], t["name"]) for t in first["tools"]] == [("function", "lookup")]


def test_a_setting_the_responses_api_reserves_is_named_at_its_line(tmp_path: Path) -> None:
    path = hive(
        tmp_path,
        """\
        r:
          model: o4-mini
          api: responses
          settings: {max_output_tokens: 100, previous_response_id: resp_1}
        c: {model: gpt-4o-mini, settings: {previous_response_id: resp_1}}
        """,
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    (error,) = [str(e) for e in caught.value.errors]
    assert error.startswith(f"{path}:5:")
    assert "models.r.settings.previous_response_id: 'previous_response_id' cannot be a" in error
