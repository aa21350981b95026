"""What the command line says: of model calls, the retries they absorbed, the tool
calls they asked for (one call, two calls) and each attempt of a planner; of a hive's
models, where their settings go; of stored runs, their counts."""

from __future__ import annotations

import io
from pathlib import Path

import msgspec
import pytest

from honeycomb import Executor, Plan, Role
from honeycomb.cli.main import main
from honeycomb.cli.runs import run_line
from honeycomb.cli.view import PlainView
from honeycomb.events import AggregationStarted
from honeycomb.hive import load_hive
from honeycomb.store import RunSummary
from honeycomb.testing import ScriptedModel
from runtime import (
    Event,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    ModelHTTPError,
    ModelRequest,
    RetryingModel,
    RetryPolicy,
    UserMessage,
)
from runtime.testing import call
from tests.support import ROOT
from tests.support.openai_server import OpenAIServer
from tests.support.sample_tools import lookup


def lines(*events: Event) -> list[str]:
    out = io.StringIO()
    view = PlainView(out)
    for event in events:
        view.handle(event)
    return [line.partition("] ")[2] for line in out.getvalue().splitlines()]


def finished(**fields: object) -> ModelCallFinished:
    values: dict[str, object] = {"worker": "w1", "turn": 1, "duration_s": 2.22, "status": "ok"}
    return ModelCallFinished(**(values | fields))  # type: ignore[arg-type]


def retrying(attempt: int, status: str, wait_s: float) -> ModelCallRetrying:
    return ModelCallRetrying(
        worker="w1", turn=1, attempt=attempt, status=status, wait_s=wait_s, error="HTTP"
    )


def test_a_call_that_absorbed_retries_says_how_many_why_and_how_long_it_waited() -> None:
    shown = lines(
        retrying(1, "429", 1.0),
        retrying(2, "429", 0.5),
        finished(attempts=3, retry_wait_s=1.5, tool_calls=2),
    )

    assert shown == [
        "w1 turn 1: model 429 (attempt 1), retrying in 1.00s",
        "w1 turn 1: model 429 (attempt 2), retrying in 0.50s",
        "w1 turn 1: model ok after 2 retries (429, waited 1.5s) in 2.22s, asked for 2 tool calls",
    ]


def test_one_of_a_kind_is_said_in_the_singular() -> None:
    shown = lines(
        retrying(1, "503", 0.75),
        finished(attempts=2, retry_wait_s=0.75, tool_calls=1),
        AggregationStarted(results=1),
    )

    assert shown[1:] == [
        "w1 turn 1: model ok after 1 retry (503, waited 0.8s) in 2.22s, asked for 1 tool call",
        "aggregating 1 result",
    ]
    assert lines(finished(tool_calls=0)) == ["w1 turn 1: model ok in 2.22s"]


async def test_each_plan_attempt_has_its_line() -> None:
    # Valid for the plan's schema, so it is a whole new attempt: it uses one id twice.
    twice = {"id": "s1", "role": "researcher", "instruction": "x"}
    bad_plan = Plan.of([twice, twice]).model_dump_json()
    good_plan = Plan.of([("researcher", "look a up")]).model_dump_json()
    model = ScriptedModel(
        {
            "r/planner": [bad_plan, good_plan],
            "r/s1": [call("lookup", {"key": "a"}), "found"],
        }
    )
    roles = [Role(name="planner"), Role(name="researcher", tools=("lookup",))]
    out = io.StringIO()
    view = PlainView(out)

    await Executor(roles, model, tools=[lookup], aggregator="concat").run(
        "t", run_id="r", on_event=[view.handle]
    )

    text = out.getvalue()
    assert text.count("planner attempt 2") == 1
    assert "planner attempt 1" not in text
    assert "planner attempt 3" not in text
    assert "s1 turn 1: model ok" in text
    assert "asked for 1 tool call\n" in text


async def test_the_retries_a_shared_model_absorbed_show_in_a_run() -> None:
    flaky = ScriptedModel([ModelHTTPError(429, retry_after=0.05), "done"])
    policy = RetryPolicy(initial_wait_s=0.01, jitter_s=0)
    out = io.StringIO()
    seen: list[Event] = []

    await Executor([Role(name="researcher")], RetryingModel(flaky, policy)).run(
        "t", subtasks=[("researcher", "a")], on_event=[PlainView(out).handle, seen.append]
    )

    assert "s1 turn 1: model ok after 1 retry (429, waited 0.1s)" in out.getvalue()
    [started] = [e for e in seen if isinstance(e, ModelCallStarted) and e.worker == "s1"]
    [retried] = [e for e in seen if isinstance(e, ModelCallRetrying)]
    assert (retried.worker, retried.run_id, retried.turn) == ("s1", started.run_id, 1)


HIVE = """\
models:
  local:
    model: qwen2.5
    base_url: http://127.0.0.1:9/v1
    settings: {temperature: 0.2, top_k: 40, min_p: 0.05, extra_body: {repetition_penalty: 1.1}}
  offline: offline
roles:
  lead: {model: local}
  researcher: {model: local}
planner: lead
"""


def test_validate_says_which_settings_go_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE)

    assert main(["validate", str(hive)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{hive}: OK (2 roles, 2 models)",
        "  model local: temperature as SDK parameters; top_k, min_p, repetition_penalty in "
        "extra_body",
    ]


def test_a_setting_honeycomb_sets_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE.replace("temperature: 0.2", "stream: true"))

    assert main(["validate", str(hive)]) == 1

    out = capsys.readouterr().out
    assert f"{hive}: 1 error" in out
    assert f"{hive}:5:16: models.local.settings.stream: 'stream' cannot be a setting" in out


def test_every_setting_honeycomb_sets_is_reported_at_its_own_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE.replace("temperature: 0.2", "stream: true, tools: [], model: m"))

    assert main(["validate", str(hive)]) == 1

    out = capsys.readouterr().out
    assert f"{hive}: 3 errors" in out
    for key, column in (("stream", 16), ("tools", 30), ("model", 41)):
        assert f"{hive}:5:{column}: models.local.settings.{key}: '{key}' cannot be a setting" in out


@pytest.mark.parametrize(
    ("written", "where", "message"),
    [
        ("extra_headers: [x-team]", "5:16: models.local.settings.extra_headers",
         "extra_headers must be a mapping of header names to text, numbers or booleans "
         "(got a list)"),
        ("extra_headers: {x-team: bees, x-ids: [1, 2]}",
         "5:46: models.local.settings.extra_headers",
         "the value of a header must be text, a number or a boolean (got a list)"),
        ("extra_query: [a]", "5:16: models.local.settings.extra_query",
         "extra_query must be a mapping of parameter names to text, numbers, booleans or lists "
         "of them (got a list)"),
        ("extra_query: {a: {b: 1}}", "5:30: models.local.settings.extra_query.a",
         "the value of a query parameter must be text, a number, a boolean or a list of them "
         "(got a mapping)"),
    ],
)  # fmt: skip
def test_sdk_settings_of_the_wrong_shape_are_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str, where: str, message: str
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE.replace("temperature: 0.2", written))

    assert main(["validate", str(hive)]) == 1

    out = capsys.readouterr().out
    assert f"{hive}: 1 error" in out
    assert f"{hive}:{where}: {message}" in out
    assert "bees" not in out  # headers are secrets: no value is shown, nor any name
    assert "x-ids" not in out


def test_extra_body_that_is_not_a_mapping_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE.replace("extra_body: {repetition_penalty: 1.1}", "extra_body: 5"))

    assert main(["validate", str(hive)]) == 1

    out = capsys.readouterr().out
    message = "extra_body must be a mapping of fields to send (got a number)"
    assert f"{hive}:5:58: models.local.settings.extra_body: {message}" in out


async def test_a_hive_models_unknown_settings_reach_the_endpoint_in_the_body(
    tmp_path: Path,
) -> None:
    with OpenAIServer() as server:
        hive = tmp_path / "hive.yaml"
        hive.write_text(HIVE.replace("http://127.0.0.1:9/v1", server.base_url))
        model = load_hive(hive).models()["local"]

        response = await model.complete(ModelRequest(messages=(UserMessage(content="hi"),)))
        await model.client.close()  # type: ignore[attr-defined]

        assert response.message.content == "ok"
        [sent] = server.requests
        assert sent.body["top_k"] == 40
        assert sent.body["repetition_penalty"] == 1.1
        assert sent.body["temperature"] == 0.2


def test_the_list_of_runs_counts_in_the_singular_and_the_plural() -> None:
    one = RunSummary(
        run_id="r1", task="t", status="ok", started_at=0.0, finished_at=1.0, workers=1,
        model_calls=1, input_tokens=1, output_tokens=0, tool_calls=1, source=None, cost=0.0,
    )  # fmt: skip
    line = run_line(one)
    assert "1 worker " in line
    assert "1 model call " in line
    assert "1 token " in line
    two = run_line(msgspec.structs.replace(one, workers=2, model_calls=3, input_tokens=5))
    assert "2 workers" in two
    assert "3 model calls" in two
    assert "5 tokens" in two


def test_the_list_of_runs_has_a_header_that_labels_every_column(
    fast_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--plain", "--latency", "0"]) == 0
    capsys.readouterr()
    assert main(["runs"]) == 0
    title, header, row = capsys.readouterr().out.splitlines()
    assert title.startswith("1 run in ")
    labels = ["run", "started", "status", "took", "ran", "workers", "model calls", "tokens",
              "cached", "cost", "task"]  # fmt: skip
    assert header.split() == " ".join(labels).split()
    # No cached tokens and no price: each "-" stands right under its label.
    for label, end in (("cached", -2), ("cost", -1)):
        dash = [i for i, c in enumerate(row) if row[i - 1 : i + 2] == " - "][end]
        assert header.index(label) + len(label) - 1 == dash, label
    assert row.index("Plan a weekend") == header.index("task")
    # docs/cli.md shows the same header.
    cli_md = (ROOT / "docs" / "cli.md").read_text()
    assert f"\n{header}\n" in cli_md
