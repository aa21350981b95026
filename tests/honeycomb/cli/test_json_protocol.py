"""The JSON tool protocol from the hive and the command line: the demo hive end to end
on a model without function calling whose server enforces a JSON schema (the local
server refusing tools, answering as the offline model would under the schema),
``--tool-protocol json`` alone on the offline model, and ``tool_protocol: json`` on a
hive's model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from honeycomb import OfflineModel
from honeycomb.cli.main import main
from honeycomb.hive import load_hive
from honeycomb.models import JsonToolModel
from runtime import OpenAIModel
from tests.honeycomb.cli.test_text_protocol import DOCUMENTED, hive
from tests.support.openai_server import OpenAIServer, RecordedRequest, Reply
from tests.support.tool_less import offline_answer, spy_on, tool_less


def test_the_demo_runs_end_to_end_through_the_json_protocol(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with OpenAIServer(tool_less(offline_answer)) as server:
        argv = [*DOCUMENTED[:-4], "--base-url", server.base_url, "--tool-protocol", "json"]
        code = main([*argv, "--plain", "--no-store"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "\nAnswer:\n[offline simulation]" in out
    bodies: list[dict[str, Any]] = [r.body for r in server.requests]
    assert all("tools" not in b and "tool_choice" not in b for b in bodies)
    assert all(isinstance(b.get("max_tokens"), int) for b in bodies)  # every call limited
    turns = [b for b in bodies if _format_name(b) == "tool_call_or_answer"]
    assert turns, "no worker turn asked for the protocol's schema"
    for body in turns:  # what each turn answered follows the schema it was sent
        schema = body["response_format"]["json_schema"]["schema"]
        jsonschema.validate(json.loads(_answer_to(body)), schema)
    users = [m["content"] for b in bodies for m in b["messages"] if m["role"] == "user"]
    assert any(u.startswith("Observation for ") and "(get_weather)" in u for u in users)
    assert len(list(fast_demo.glob("*.md"))) == 1  # the side-effecting call ran once


def _format_name(body: dict[str, Any]) -> str | None:
    found = body.get("response_format", {}).get("json_schema", {})
    return found.get("name") if isinstance(found, dict) else None


def _answer_to(body: dict[str, Any]) -> str:
    """What the offline rules answered to ``body`` (they are deterministic)."""
    reply = offline_answer(
        RecordedRequest(path="/v1/chat/completions", body=body, headers={}, at=0)
    )
    assert isinstance(reply, Reply)
    return reply.content or ""


def test_the_demo_with_only_tool_protocol_json_runs_the_offline_model_through_it(
    fast_demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = spy_on(monkeypatch, JsonToolModel)
    assert main(["demo", "--plain", "--latency", "0", "--tool-protocol", "json"]) == 0
    assert "\nAnswer:\n[offline simulation]" in capsys.readouterr().out
    assert all(isinstance(inner, OfflineModel) for inner, _ in seen)
    assert sum(len(r.message.tool_calls) for _, r in seen) >= 4  # read back from JSON
    assert len(list(fast_demo.glob("*.md"))) == 1


def test_a_hive_model_says_tool_protocol_json(tmp_path: Path) -> None:
    path = hive(
        tmp_path,
        """\
        local: {model: smollm2, base_url: 'http://127.0.0.1:9/v1', tool_protocol: json}
        offline: {provider: offline, tool_protocol: json}
        """,
    )
    # Each built as declared (a hive builds only those its roles use).
    models = {name: spec.build() for name, spec in load_hive(path).spec.models.items()}
    assert isinstance(models["local"], JsonToolModel)
    assert type(models["local"].inner) is OpenAIModel
    assert isinstance(models["offline"], JsonToolModel)
    assert isinstance(models["offline"].inner, OfflineModel)
