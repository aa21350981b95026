"""A model that cannot be reached is not a model that plans badly: a transport error
(an endpoint that refuses, breaks off or never answers, a key that is not set) ends
the plan as itself, after the model's own retries only, and a key that a model needs
and lacks is refused before the run starts."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from honeycomb import ConfigErrors, Executor, Policy, Role
from honeycomb.cli.main import main
from runtime import (
    Event,
    ModelCallRetrying,
    ModelConnectionError,
    ModelTimeout,
    PlanError,
)
from runtime.limits.retry import RetryPolicy
from runtime.models.openai.chat import OpenAIModel
from runtime.models.protocols.text_tools import TextToolModel
from runtime.testing import FunctionModel

ROLES = [
    Role(name="planner", description="Plans."),
    Role(name="researcher", description="Researches one question."),
]
RETRIES = RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=0.01, jitter_s=0.0)
"""The model's own retries: two attempts a call, hardly any wait between them."""


class Listener:
    """A TCP port on 127.0.0.1 that accepts connections and counts them: it closes
    each at once (``answer="close"``), or holds it open and never answers."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.connections = 0
        self._held: list[socket.socket] = []
        self._server = socket.create_server(("127.0.0.1", 0))  # listening on return
        self.port = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:  # closed: the test is over
                return
            self.connections += 1
            if self.answer == "close":
                conn.close()
            else:
                self._held.append(conn)

    @contextmanager
    def running(self) -> Iterator[Listener]:
        self._thread.start()
        try:
            yield self
        finally:
            self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._thread.join(timeout=5)
            for conn in self._held:
                conn.close()


def closed_port() -> int:
    """A port nothing listens on: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def text_protocol_model(port: int, *, timeout: float = 5.0) -> TextToolModel:
    """A model that speaks the text tool protocol to an endpoint on ``port``."""
    url = f"http://127.0.0.1:{port}/v1"
    return TextToolModel(OpenAIModel("m", base_url=url, timeout=timeout, retry=RETRIES))


async def test_an_endpoint_that_refuses_fails_the_plan_as_itself_once_retried() -> None:
    port = closed_port()
    events: list[Event] = []
    executor = Executor(ROLES, text_protocol_model(port), on_event=[events.append])
    with anyio.fail_after(30), pytest.raises(ModelConnectionError) as caught:
        await executor.run("Study bees.")
    assert f"cannot reach the model endpoint (http://127.0.0.1:{port}/v1)" in str(caught.value)
    assert not isinstance(caught.value, PlanError)
    retries = [e for e in events if isinstance(e, ModelCallRetrying)]
    assert len(retries) == RETRIES.attempts - 1  # the model's own retries, and no plan attempt


@pytest.mark.parametrize("answer", ["close", "never"])
async def test_plan_attempts_never_multiply_the_models_connections(answer: str) -> None:
    with Listener(answer).running() as server:
        executor = Executor(ROLES, text_protocol_model(server.port, timeout=0.3))
        with anyio.fail_after(30), pytest.raises((ModelConnectionError, ModelTimeout)) as caught:
            await executor.run("Study bees.")
    assert server.connections == RETRIES.attempts  # not plan_attempts times as many
    if answer == "never":
        assert isinstance(caught.value, ModelTimeout)
        assert "timed out after 0.3s" in str(caught.value)


async def test_a_key_a_model_needs_and_lacks_is_refused_before_the_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[Event] = []
    store = tmp_path / "runs.db"
    executor = Executor(
        [*ROLES, Role(name="writer", model="gpt")],
        {"local": FunctionModel(lambda request: "ok"), "gpt": OpenAIModel("gpt-4o-mini")},
        default_model="local",
        on_event=[events.append],
        store=store,
    )
    with pytest.raises(ConfigErrors) as caught:
        await executor.run("t", subtasks=[("researcher", "look")])
    [error] = caught.value.errors
    assert "model 'gpt-4o-mini' needs an API key: set OPENAI_API_KEY" in str(error)
    assert events == []  # nothing started
    assert not store.exists()  # not even opened

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
    executor.check_keys()  # set now: the run may start


async def test_a_model_no_role_uses_needs_no_key() -> None:
    executor = Executor(
        ROLES,
        {"local": FunctionModel(lambda request: "ok"), "gpt": OpenAIModel("gpt-4o-mini")},
        default_model="local",
        aggregator="concat",
    )
    result = await executor.run("t", subtasks=[("researcher", "look")])
    assert result.status == "ok"


HIVE = """\
models:
  default: offline
  gpt: {model: gpt-4o-mini%s}
roles:
  planner: {description: Plans.}
  writer: {description: Writes., model: gpt}
"""


def test_validate_warns_of_a_key_a_model_needs_naming_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE % "")
    assert main(["validate", str(path)]) == 0  # a warning: the file itself is valid
    out = capsys.readouterr().out
    assert f"{path}: OK" in out
    assert f"warning: {path}:3:3: models.gpt: model 'gpt-4o-mini' needs an API key" in out
    assert "set OPENAI_API_KEY" in out

    for fixed in (", base_url: 'http://127.0.0.1:11434/v1'", ", api_key: sk-0123456789abcdef"):
        path.write_text(HIVE % fixed)
        assert main(["validate", str(path)]) == 0
        assert "warning" not in capsys.readouterr().out


def test_run_refuses_a_missing_key_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE % "")
    code = main(["run", str(path), "Study bees.", "--plain", "--store", str(tmp_path / "r.db")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "model 'gpt-4o-mini' needs an API key: set OPENAI_API_KEY" in err
    assert "invalid plan" not in out + err
    assert not (tmp_path / "r.db").exists()


async def test_a_plan_that_keeps_failing_its_schema_costs_plan_attempts_answers() -> None:
    asked: list[int] = []

    def planner(request: object) -> str:
        asked.append(1)
        return '{"subtasks": [{"id": "a", "role": "nobody", "instruction": "go"}]}'

    executor = Executor(
        ROLES, FunctionModel(planner), policy=Policy(plan_attempts=3), aggregator="concat"
    )
    with pytest.raises(PlanError, match="after 3 attempts") as caught:
        await executor.run("t")
    assert caught.value.attempts == 3
    assert len(asked) == 3  # not plan_attempts × (1 + the planner's output_retries)


TEXT_HIVE = """\
models:
  local:
    model: m
    base_url: http://127.0.0.1:%d/v1
    tool_protocol: text
    timeout: 0.3
    retry: {attempts: 2, initial_wait_s: 0.01, max_wait_s: 0.01}
roles:
  planner: {description: Plans.}
  researcher: {description: Researches one question.}
"""


def test_run_against_an_endpoint_that_never_answers_says_it_timed_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hive.yaml"
    with Listener("never").running() as server:
        path.write_text(TEXT_HIVE % server.port)
        assert main(["validate", str(path)]) == 0
        assert "warning" not in capsys.readouterr().out  # a local endpoint needs no key
        code = main(["run", str(path), "Study bees.", "--plain", "--no-store"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "run failed: the model call timed out after 0.3s" in out + err
    assert "invalid plan" not in out + err
    assert server.connections == 2  # the model's two attempts, once
