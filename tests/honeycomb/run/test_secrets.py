"""A probe of secrets: an endpoint that plants the run's API key in every field a
server controls (a tool call's name and arguments, the content, reasoning and refusal,
the answer's id, model name, fingerprint and logprobs, the finish reason, a usage
field, the headers, an error body), for a task that quotes it too, in a hive with a run
store and a budget that trips, run by ``honeycomb run`` in a subprocess and by
``Executor.run`` in-process (one-shot, streamed, the Responses API); then every sink is
searched for the key: the store's file and its -wal and -shm, the events, structlog
(captured and a configured JSON log), the command line's output (``run``, ``run
--json``, ``runs``, ``trace`` and its HTML and JSON lines), the error raised and its
``.partial``. Then the sinks alone, whatever the source (a tool, a test model, an MCP
server), and the sources that mask as they read."""

from __future__ import annotations

import gc
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from honeycomb import (
    ApprovalRequest,
    AssistantMessage,
    BudgetExceeded,
    Decision,
    Executor,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    Role,
    ToolCall,
    add_secret,
    tool,
)
from honeycomb.cli.main import main
from honeycomb.events import TextDelta
from honeycomb.testing import ScriptedModel, call
from honeycomb.tracing import configure_logging
from runtime import Event, HoneycombError
from runtime.secrets import known, masked
from runtime.testing import FunctionModel
from tests.support import ROOT
from tests.support.mcp_servers import sdk_server
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    Raw,
    RecordedRequest,
    Reply,
)

KEY = "sk-probe-7Qm2Xv9Lr4Tz8Kp1Wd6Hn3Bc5"
TASK = f"Probe the endpoint (its key: {KEY})."

HIVE = """\
models:
  default:
    model: gpt-probe
    base_url: {base_url}
    api_key: ${{PROBE_KEY}}
    retry: {{attempts: 3, initial_wait_s: 0.01, max_wait_s: 0.02}}
roles:
  planner: {{description: Plans.}}
  worker: {{description: Works., max_turns: 6}}
policy:
  budgets: {{model_calls: 5}}
store: runs.db
"""


def planted_completion(number: int) -> dict[str, Any]:
    """A chat completion with the key in every field a server writes."""
    message = {
        "role": "assistant",
        "content": f"the key is {KEY} (x{KEY}y)",
        "refusal": KEY,
        "reasoning_content": f"I will show {KEY}",
        "tool_calls": [
            {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": KEY, "arguments": json.dumps({KEY: KEY, "n": f"_{KEY}"})},
            }
        ],
    }
    return {
        "id": KEY,
        "object": "chat.completion",
        "created": 1,
        "model": KEY,
        "system_fingerprint": KEY,
        "choices": [{"index": 0, "message": message, "logprobs": KEY, "finish_reason": KEY}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "note": KEY},
    }


class Planting:
    """Answers the planner with a plan whose instruction holds the key; a worker's
    first call with an error body echoing the key (a 500: retried), every other
    with the planted completion, the key in the headers of both."""

    def __init__(self) -> None:
        self.worker_calls = 0

    def __call__(self, request: RecordedRequest) -> Behaviour:
        headers = {"x-request-id": KEY, "x-ratelimit-remaining-requests": KEY}
        body = request.body if isinstance(request.body, dict) else {}
        if "response_format" in body or "format" in str(body.get("text", "")):
            plan = {"subtasks": [{"id": "s1", "role": "worker", "instruction": f"use {KEY}"}]}
            return Reply(content=json.dumps(plan))
        self.worker_calls += 1
        if self.worker_calls == 1:
            echoed = {"error": {"message": f"upstream said: Authorization: Bearer {KEY}"}}
            return Raw(500, body=echoed, headers=headers)
        if request.path.endswith("/responses") or body.get("stream"):
            return Reply(
                content=f"the key is {KEY}",
                reasoning=KEY,
                tool_calls=((f"call_{self.worker_calls}", KEY, json.dumps({KEY: KEY})),),
                model=KEY,
            )
        return Raw(200, body=planted_completion(self.worker_calls), headers=headers)


class Seen:
    """Everything shown to the outside, as text, searched for ``secret``."""

    def __init__(self, secret: str = KEY) -> None:
        self.secret = secret
        self.texts: dict[str, list[str]] = {}

    def add(self, sink: str, *values: Any) -> None:
        shown = self.texts.setdefault(sink, [])
        for value in values:
            shown += [str(value), repr(value)]

    def event(self, event: Event) -> None:
        self.add("events", event, json.dumps(event.fields(), default=repr))

    def error(self, exc: BaseException) -> None:
        self.add("error", "".join(traceback.format_exception(exc)))
        todo: list[BaseException | None] = [exc]
        while todo:
            current = todo.pop()
            if current is None:
                continue
            self.add("error", current, current.args, vars(current))
            partial = getattr(current, "partial", None)
            if partial is not None:
                self.add("partial", partial, partial.model_dump_json())
            todo += [current.__cause__, current.__context__]

    def files(self, sink: str, folder: Path, pattern: str) -> None:
        paths = sorted(folder.glob(pattern))
        assert paths, f"no {sink} to search: the search would prove nothing"
        self.add(sink, *(p.read_bytes().decode("utf-8", "replace") for p in paths))

    def leaks(self) -> list[str]:
        shown = self.texts.items()
        return sorted(sink for sink, texts in shown if any(self.shows(t) for t in texts))

    def shows(self, text: str) -> bool:
        """Whether ``text`` holds the secret, as it is or as escapes decode to it."""
        return self.secret in text or self.secret in unescaped(text)


def unescaped(text: str) -> str:
    """``text`` with every ``\\uXXXX`` escape decoded, however many backslashes escape
    it in turn (JSON held in JSON): a reader of its own, to judge the library's."""
    return re.sub(r"\\+u([0-9a-fA-F]{4})", lambda found: chr(int(found[1], 16)), text)


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(Planting()) as running:
        yield running


def hive(folder: Path, server: OpenAIServer) -> Path:
    path = folder / "hive.yaml"
    path.write_text(textwrap.dedent(HIVE.format(base_url=server.base_url)))
    return path


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROBE_KEY": KEY, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "honeycomb", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_command_line_shows_and_keeps_no_secret(tmp_path: Path, server: OpenAIServer) -> None:
    seen = Seen()
    path = hive(tmp_path, server)
    for view in ("--plain", "--json"):
        done = cli(tmp_path, "run", str(path), TASK, view)
        assert done.returncode == 1, done.stderr  # the budget tripped
        seen.add(f"run {view}", done.stdout, done.stderr)
    assert "budget exceeded" in seen.texts["run --plain"][0]
    store = tmp_path / "runs.db"
    listed = cli(tmp_path, "runs", "--store", str(store))
    seen.add("runs", listed.stdout, listed.stderr)
    run_id = listed.stdout.splitlines()[2].split()[0]  # under the count and the header
    html, jsonl = tmp_path / "trace.html", tmp_path / "trace.jsonl"
    traced = cli(tmp_path, "trace", run_id, "--store", str(store), "--html", str(html),
                 "--jsonl", str(jsonl))  # fmt: skip
    assert traced.returncode == 0, traced.stderr
    seen.add("trace", traced.stdout, traced.stderr)
    seen.files("trace files", tmp_path, "trace.*")
    seen.files("store", tmp_path, "runs.db*")
    assert any(KEY in str(r.headers) for r in server.requests)  # it was sent: a leak would show
    assert seen.leaks() == [], f"the key shows in: {seen.leaks()}"
    assert "[api key hidden]" in seen.texts["run --plain"][0]  # where it was is said


async def stopped_by_budget(executor: Executor, streamed: bool, seen: Seen) -> BudgetExceeded:
    """One run of the probe, which its budget stops."""
    try:
        if streamed:
            async with executor.stream(TASK) as events:
                async for event in events:
                    seen.event(event)
        else:
            await executor.run(TASK)
    except BudgetExceeded as exc:
        stopped = exc
    else:
        raise AssertionError("the budget did not trip: the probe would miss .partial")
    assert stopped.partial is not None
    return stopped


@pytest.mark.parametrize("api", ["chat", "chat streamed", "responses"])
async def test_a_run_in_process_shows_and_keeps_no_secret(
    tmp_path: Path, server: OpenAIServer, api: str
) -> None:
    from honeycomb import load_hive

    seen = Seen()
    text = hive(tmp_path, server).read_text()
    if api == "responses":
        text = text.replace("model: gpt-probe", "model: gpt-probe\n    api: responses")
    (tmp_path / "hive.yaml").write_text(text.replace("${PROBE_KEY}", KEY))
    executor = Executor.from_hive(load_hive(tmp_path / "hive.yaml"), on_event=[seen.event])
    streamed = api == "chat streamed"
    with capture_logs() as logs:
        seen.error(await stopped_by_budget(executor, streamed, seen))
    seen.add("structlog", *logs)
    structlog.reset_defaults()
    json_log = io.StringIO()
    configure_logging(json=True, stream=json_log)
    seen.error(await stopped_by_budget(executor, streamed, seen))
    seen.add("json log", json_log.getvalue())
    seen.files("store", tmp_path, "runs.db*")
    assert logs
    assert any("TextDelta" in t for t in seen.texts["events"]) == streamed
    assert seen.leaks() == [], f"the key shows in: {seen.leaks()}"
    assert "[api key hidden]" in json_log.getvalue()  # what was there is said


def test_the_probe_sees_a_key_that_is_not_masked() -> None:
    seen = Seen()
    seen.add("events", f"tool {KEY}")
    assert seen.leaks() == ["events"]
    with pytest.raises(HoneycombError) as raised:
        raise HoneycombError(f"partial {KEY}")
    seen.error(raised.value)
    assert seen.leaks() == ["error", "events"]
    seen.add("store", json.dumps({"text": written_in_escapes(KEY, "nested")}))
    assert seen.leaks() == ["error", "events", "store"]


# --- every sink masks, whatever the source --------------------------------------------

TOOL_SECRET = "db-pass-Tq83Lm20Xc7Wz"


@tool(approval=True)
def read_config(section: str) -> str:
    """Read a section of the service's configuration (it holds the password)."""
    return f"[{section}] password = {TOOL_SECRET}"


def leaky(request: ModelRequest) -> AssistantMessage:
    """Calls the tool with the secret as its argument, then answers with it."""
    if not any(m.role == "tool" for m in request.messages):
        call = ToolCall(id="c1", name="read_config", arguments=json.dumps({"section": TOOL_SECRET}))
        return AssistantMessage(content=f"reading {TOOL_SECRET}", tool_calls=(call,))
    return AssistantMessage(content=f"the password is {TOOL_SECRET}")


async def test_every_sink_masks_a_secret_from_a_tool_or_a_model_of_any_kind(
    tmp_path: Path,
) -> None:
    seen = Seen(TOOL_SECRET)
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.approved()

    def failing(event: Event) -> None:  # a handler that fails says why in the log
        raise ConnectionError(f"cannot forward it with {TOOL_SECRET}")

    executor = Executor(
        [Role(name="worker", tools=("read_config",))], FunctionModel(leaky), tools=[read_config],
        aggregator="concat", store=tmp_path / "runs.db", on_event=[seen.event, failing],
        approver=approver,
    )  # fmt: skip
    add_secret(TOOL_SECRET, "password", owner=executor)
    with capture_logs() as logs:
        result = await executor.run("Read it.", subtasks=[("worker", "read the config")])
    seen.add("result", result, result.model_dump_json())
    seen.add("structlog", *logs)
    seen.add("approver", *asked)
    seen.files("store", tmp_path, "runs.db*")
    assert asked
    assert result.answer_text
    assert any(entry["event"] == "event_handler.failed" for entry in logs)
    assert seen.leaks() == [], f"the secret shows in: {seen.leaks()}"
    assert "the password is [password hidden]" in result.answer_text


PASSPHRASE = "correct horse battery staple"


class Chunked:
    """A model of one's own that streams its answer five characters at a time."""

    name = "chunked"

    def __init__(self, text: str) -> None:
        self.text = text

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(message=AssistantMessage(content=self.text))

    async def stream(self, request: ModelRequest, on_text: Callable[[str], None]) -> ModelResponse:
        for start in range(0, len(self.text), 5):
            on_text(self.text[start : start + 5])
        return await self.complete(request)


@pytest.mark.parametrize("kind", ["word by word", "in chunks"])
async def test_a_secret_split_across_streamed_pieces_reaches_no_listener(kind: str) -> None:
    """Each piece of a streamed answer is masked as it goes out, and a secret split
    across pieces is in none of them alone: the pieces' end that may begin one waits for
    the next piece, whatever model streams them (not only those with retries)."""
    answer = f"use {PASSPHRASE} to log in"
    model = FunctionModel(lambda request: answer) if kind == "word by word" else Chunked(answer)
    deltas: list[str] = []

    def listen(event: Event) -> None:
        if isinstance(event, TextDelta):
            deltas.append(event.text)

    executor = Executor([Role(name="w")], model, on_event=[listen])
    add_secret(PASSPHRASE, "passphrase", owner=executor)
    result = await executor.run("t", subtasks=[("w", "x")], text_deltas=True)
    assert len(deltas) > 1  # it was streamed, in pieces
    assert "".join(deltas) == result.subtasks["s1"].text == "use [passphrase hidden] to log in"


def test_a_configured_log_masks_the_applications_own_entries_and_tracebacks() -> None:
    class Service:
        """What keeps the password known while it lives."""

    service = Service()
    add_secret(TOOL_SECRET, "password", owner=service)
    out = io.StringIO()
    configure_logging(json=True, stream=out)
    log = structlog.get_logger("app")
    try:
        raise ConnectionError(f"cannot log in with {TOOL_SECRET}")
    except ConnectionError:
        log.exception("database down", dsn=f"postgresql://app:{TOOL_SECRET}@db/app")
    entry = json.loads(out.getvalue())
    assert TOOL_SECRET not in out.getvalue()
    assert entry["dsn"] == "postgresql://app:[password hidden]@db/app"
    assert "cannot log in with [password hidden]" in entry["exception"]


def test_the_serve_token_is_a_secret_while_its_app_lives(tmp_path: Path) -> None:
    from honeycomb.web import create_app

    token = "serve-token-Wm4Kd8Qz2Lp6"
    app = create_app(tmp_path / "runs.db", token=token)
    assert masked(f"GET /?token={token}") == "GET /?token=[token hidden]"
    del app
    gc.collect()
    assert token not in known()


def test_validate_shows_no_token_an_mcp_server_says_as_it_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "mcp-token-Hx5Rt9Kw3Jq7"
    failing = "import os, sys; sys.exit('refused the token ' + os.environ['TOKEN'])"
    path = tmp_path / "hive.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            models: {{default: offline}}
            mcp_servers:
              bad: {{command: {sys.executable}, args: [-c, "{failing}"], env: {{TOKEN: {token}}}}}
            roles:
              planner: {{description: Plans.}}
              worker: {{description: Works., tools: ["bad:*"]}}
            """
        )
    )
    assert main(["validate", str(path)]) != 0
    shown = capsys.readouterr()
    assert "refused the token [secret hidden]" in shown.out + shown.err
    assert token not in shown.out + shown.err


async def test_what_an_mcp_server_sends_back_is_masked_before_the_model_reads_it() -> None:
    greeting = "greeting-secret-Zk4Mw8"
    model = ScriptedModel([call("where"), "found"])
    executor = Executor(
        [Role(name="finder", tools=("t:where",))], model, aggregator="concat",
        mcp_servers=[sdk_server(env={"MCP_TEST_GREETING": greeting})],
    )  # fmt: skip
    await executor.run("Where?", subtasks=[("finder", "look")])
    read = repr(model.requests[-1].messages)
    assert greeting not in read
    assert '"MCP_TEST_GREETING": "[secret hidden]"' in read
    # Its PYTHONPATH (the clone's folder, where it runs) is a setting, not a secret:
    # masked, it hid the folder in every path the server showed.
    assert sdk_server().env["PYTHONPATH"] == os.getcwd()
    assert json.dumps(os.getcwd()) in read


async def test_a_run_whose_task_holds_a_secret_is_picked_up_by_its_own_task(
    tmp_path: Path,
) -> None:
    class Service:
        """What keeps the password known while it lives."""

    service = Service()
    add_secret(TOOL_SECRET, "password", owner=service)
    task = f"Log in with {TOOL_SECRET}."
    executor = Executor(
        [Role(name="worker")], ScriptedModel(["in"]), aggregator="concat",
        store=tmp_path / "runs.db",
    )  # fmt: skip
    first = await executor.run(task, subtasks=[("worker", "log in")], run_id="login")
    again = await executor.run(task, subtasks=[("worker", "log in")], run_id="login")
    assert again.answer_text == first.answer_text  # the stored result, not an error


# --- a secret sent back written in escapes --------------------------------------------


def written_in_escapes(text: str, how: str) -> str:
    """``text`` as a JSON string's content that escapes it: every character as
    ``\\uXXXX``; escapes in either case mixed with plain characters; or JSON that
    escapes every character, held in a JSON string (the escapes escaped in turn)."""
    if how == "every character":
        return "".join(f"\\u{ord(c):04x}" for c in text)
    if how == "mixed":
        forms = (lambda c: c, lambda c: f"\\u{ord(c):04X}", lambda c: f"\\u{ord(c):04x}")
        return "".join(forms[at % 3](c) for at, c in enumerate(text))
    assert how == "nested"
    inner = '{"inner": "' + written_in_escapes(text, "every character") + '"}'
    return json.dumps(inner)[1:-1]


received: list[str] = []


@tool
def echo(text: str) -> str:
    """Say ``text`` back."""
    received.append(text)
    return f"echoed {text}"


@pytest.mark.parametrize("how", ["every character", "mixed", "nested"])
@pytest.mark.parametrize("source", ["endpoint", "function model"])
async def test_a_key_sent_back_in_json_escapes_is_masked_as_they_decode(
    tmp_path: Path, source: str, how: str
) -> None:
    arguments = '{"text": "' + written_in_escapes(KEY, how) + '"}'
    assert KEY in unescaped(json.loads(arguments)["text"])  # what a tool would read
    seen = Seen()
    received.clear()
    with OpenAIServer() as server:
        if source == "endpoint":
            server.enqueue(
                Reply(tool_calls=(("c1", "echo", arguments),)), Reply(content=f"done, {arguments}")
            )
            model: Any = OpenAIModel("gpt-probe", base_url=server.base_url, api_key=KEY)
        else:

            def calling(request: ModelRequest) -> AssistantMessage:
                if any(m.role == "tool" for m in request.messages):
                    return AssistantMessage(content=f"done, {arguments}")
                call = ToolCall(id="c1", name="echo", arguments=arguments)
                return AssistantMessage(content=arguments, tool_calls=(call,))

            model = FunctionModel(calling)
            add_secret(KEY, "api key", owner=model)
        executor = Executor(
            [Role(name="worker", tools=("echo",))], model, tools=[echo], aggregator="concat",
            store=tmp_path / "runs.db", on_event=[seen.event],
        )  # fmt: skip
        result = await executor.run("Echo it.", subtasks=[("worker", "echo the text")])
    seen.add("result", result, result.model_dump_json())
    seen.files("store", tmp_path, "runs.db*")
    assert len(received) == 1
    if source == "endpoint":  # what an endpoint sends back reaches no tool
        seen.add("tool", *received)
        assert "[api key hidden]" in received[0]
    assert seen.leaks() == [], f"the key shows in: {seen.leaks()}"
    assert "[api key hidden]" in result.answer_text


def test_a_commands_report_written_after_its_models_are_gone_shows_no_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The eval's report is printed and written once its executor and models are gone:
    # the key they registered was forgotten with them, and shown in clear.
    key = "sk-test-SEAMKEY-4f8Lq2Zx"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    hive = tmp_path / "hive.yaml"
    hive.write_text(
        textwrap.dedent(
            """\
            models:
              offline: {provider: offline}
              gpt: {model: gpt-4o-mini, api_key: "${OPENAI_API_KEY}"}  # never called
            default_model: offline
            roles:
              planner: {description: Plans.}
              helper: {description: Answers questions.}
            """
        )
    )
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        f"name: keys\ncases:\n  - id: leak\n    task: Answer {key}\n"
        f"    assert:\n      - contains: '{key}'\n"
    )
    files = [tmp_path / "report.xml", tmp_path / "report.html"]
    eval_ = ["eval", str(hive), str(cases), "--no-store"]
    assert main([*eval_, "--junit", str(files[0]), "--html", str(files[1])]) == 4
    assert main([*eval_, "--json"]) == 4
    shown = capsys.readouterr()
    written = "".join(path.read_text() for path in files)
    assert "[api key hidden]" in shown.out
    assert "[api key hidden]" in written
    assert key not in shown.out + shown.err + written
