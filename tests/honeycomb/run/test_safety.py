"""Safety: workers call only their role's tools, an API key never shows up in events,
logs, errors, results or reprs, and the library never evaluates code it reads."""

from __future__ import annotations

import ast
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from honeycomb import Executor, Role
from honeycomb.hive import load_hive
from runtime import (
    AssistantMessage,
    Event,
    HoneycombError,
    ModelRequest,
    OpenAIModel,
    RetryPolicy,
    ToolCall,
    ToolMessage,
    tool,
)
from runtime.testing import FunctionModel
from tests.support import ROOT
from tests.support.openai_server import OpenAIServer, Raw, error, text

# --- default deny --------------------------------------------------------------------

ran: list[str] = []


@tool
def allowed(x: str = "") -> str:
    """A tool the role lists."""
    ran.append("allowed")
    return "fine"


@tool
def secret_tool(x: str = "") -> str:
    """Registered with the Executor, listed by no role."""
    ran.append("secret_tool")
    return "should never run"


NEAR_MISSES = ["secret_tool", "Secret_Tool", "SECRET_TOOL", " secret_tool", "secret_tool\n"]


def asks_for_everything(request: ModelRequest) -> AssistantMessage:
    """First turn: call every near miss of the unlisted tool, and the allowed one."""
    if any(m.role == "tool" for m in request.messages):
        return AssistantMessage(content="done")
    names = [*NEAR_MISSES, "allowed"]
    return AssistantMessage(
        tool_calls=tuple(ToolCall(id=f"c{i}", name=n, arguments="{}") for i, n in enumerate(names))
    )


@pytest.mark.parametrize("listed", [("allowed",), ()])
async def test_a_worker_calls_only_the_tools_its_role_lists(listed: tuple[str, ...]) -> None:
    ran.clear()
    model = FunctionModel(asks_for_everything)
    executor = Executor(
        [Role(name="worker", tools=listed)],
        model,
        tools=[allowed, secret_tool],
        aggregator="concat",
    )
    result = await executor.run("t", subtasks=[("worker", "do it")])
    offered = {t.name for r in model.requests for t in r.tools}
    assert offered == set(listed)
    assert "secret_tool" not in ran
    assert ran == (["allowed"] if listed else [])
    (subtask,) = result.subtasks.values()
    worker = subtask.worker
    assert worker is not None
    observations = [m for m in worker.transcript.messages if isinstance(m, ToolMessage)]
    assert [o.name for o in observations] == [*NEAR_MISSES, "allowed"]
    for obs in observations[: len(NEAR_MISSES)]:
        assert obs.status == "error"
        assert "unknown tool" in obs.content
        assert "secret_tool" not in obs.content.partition("Available tools:")[2]


# --- secrets -------------------------------------------------------------------------

KEY = "sk-honeycomb-test-SECRET-1234"


def echoing(status: int) -> Raw:
    """An error whose body echoes the request's Authorization header, as some
    proxies and debugging servers do."""
    return Raw(
        status, body={"error": {"message": f"bad request; headers: Authorization: Bearer {KEY}"}}
    )


BEHAVIOURS = {
    "401": [error(401, f"Incorrect API key provided: {KEY}")],
    "500 echoing the header": [echoing(500), echoing(500)],
    "400 echoing the header": [echoing(400)],
    "200 with a body that is not JSON": [Raw(200, content=f"Authorization: Bearer {KEY}".encode())],
    "timeout": [text("late", delay_s=1.0), text("late", delay_s=1.0)],
    "success": [text("all good")],
}


class Seen:
    """Everything a run showed to the outside, as text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, *values: Any) -> None:
        for value in values:
            self.texts += [str(value), repr(value)]

    def event(self, event: Event) -> None:
        self.add(event, event.fields(), json.dumps(event.fields(), default=str))

    def exception(self, exc: BaseException | None) -> None:
        while exc is not None:  # the whole chain: a traceback would print it all
            self.add(exc, exc.args, getattr(exc, "body", None))
            partial = getattr(exc, "partial", None)
            if partial is not None:
                self.add(partial, partial.model_dump_json())
            exc = exc.__cause__ or exc.__context__

    def leaks(self) -> list[str]:
        return [t for t in self.texts if KEY in t]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.mark.parametrize("case", list(BEHAVIOURS))
async def test_the_api_key_appears_nowhere(server: OpenAIServer, case: str, tmp_path: Path) -> None:
    seen = Seen()
    store = tmp_path / "runs.db"
    model = OpenAIModel(
        "gpt-test",
        base_url=server.base_url,
        api_key=KEY,
        timeout=0.5,  # a whole attempt: under the "timeout" behaviour's 1 s, over a loaded one
        retry=RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=0.02, jitter_s=0),
    )
    executor = Executor(
        [Role(name="worker")], model, aggregator="concat", on_event=[seen.event],
        log_events=True, store=store,
    )  # fmt: skip
    seen.add(model, executor)
    with structlog.testing.capture_logs() as logs:
        for streamed in (False, True):
            server.enqueue(*BEHAVIOURS[case])
            try:
                if streamed:
                    async with executor.stream("t", subtasks=[("worker", "go")]) as events:
                        async for event in events:
                            seen.event(event)
                    result = events.result
                else:
                    result = await executor.run("t", subtasks=[("worker", "go")])
            except HoneycombError as exc:
                seen.exception(exc)
            else:
                assert result is not None
                seen.add(result, result.model_dump_json())
                for sub in result.subtasks.values():
                    if sub.worker is not None:
                        seen.exception(sub.worker.exception)
    seen.add(*logs)
    assert logs, "structlog captured nothing: the scan would prove nothing"
    shown = ("api key hidden", "all good", "timed out")
    assert any(s in t for s in shown for t in seen.texts), "the run showed none of its outcome"
    # the key was sent, so the test would see it if anything echoed it
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    assert seen.leaks() == []
    # the run store: every byte of the database and its write-ahead log
    kept = b"".join(p.read_bytes() for p in tmp_path.glob("runs.db*"))  # noqa: ASYNC240
    assert b"gpt-test" in kept or b"worker" in kept  # the store did keep the runs
    assert KEY.encode() not in kept
    await model.client.close()


def test_a_hive_api_key_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIVE_SECRET", KEY)
    hive = tmp_path / "hive.yaml"
    hive.write_text(
        textwrap.dedent(
            """\
            models:
              gpt: {model: gpt-test, base_url: "http://127.0.0.1:9/v1", api_key: "${HIVE_SECRET}"}
              inline: {model: gpt-test, api_key: sk-honeycomb-test-SECRET-1234}
            roles:
              worker: {description: Works.}
            """
        )
    )
    loaded = load_hive(hive)
    for spec in loaded.spec.models.values():
        shown = [repr(spec), str(spec), spec.model_dump_json(), repr(spec.model_dump())]
        assert all(KEY not in s for s in shown), shown
    assert KEY not in repr(loaded.spec)
    assert KEY not in repr(loaded.models())
    assert KEY not in repr(Executor.from_hive(loaded))
    built = loaded.models()["gpt"]
    assert isinstance(built, OpenAIModel)
    assert built.client.api_key == KEY  # masked, not lost


# --- no eval -------------------------------------------------------------------------

SCANNED = ["runtime", "workers", "honeycomb", "examples"]
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}


UNSAFE_LOADS = {
    "pickle": {"load", "loads"},
    "marshal": {"load", "loads"},
    "dill": {"load", "loads"},
    "cloudpickle": {"load", "loads"},
    "yaml": {"unsafe_load", "unsafe_load_all", "full_load", "full_load_all", "load_all"},
}


def dangerous_calls(source: str) -> list[str]:
    """``eval``/``exec``/``compile`` called in any way, ``pickle.loads`` and friends,
    ``yaml.load`` without a SafeLoader, and ``yaml.unsafe_load``."""
    return [
        f"line {node.lineno}: {ast.unparse(node.func)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and is_dangerous(node)
    ]


def is_dangerous(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in FORBIDDEN_CALLS
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return False
    owner, name = func.value.id, func.attr
    if owner == "builtins":
        return name in FORBIDDEN_CALLS
    if owner == "yaml" and name == "load":
        loader = [k.value for k in node.keywords if k.arg == "Loader"] + node.args[1:2]
        return not loader or "Safe" not in ast.unparse(loader[0])
    return name in UNSAFE_LOADS.get(owner, set())


def test_the_scan_finds_what_it_forbids() -> None:
    bad = "eval('1')\nbuiltins.exec('x')\ncompile('1', 'f', 'eval')\npickle.loads(b'')\n"
    bad += "yaml.load(text)\nyaml.load(text, Loader=yaml.Loader)\nyaml.unsafe_load(text)\n"
    assert len(dangerous_calls(bad)) == 7
    good = "yaml.load(text, Loader=yaml.SafeLoader)\nre.compile('x')\nast.literal_eval('1')\n"
    assert dangerous_calls(good) == []


# Each with why it is safe: no trust boundary that was not there already.
ALLOWED = {
    # A model the driver pickled (its endpoints as their settings, its limiters as
    # stand-ins), sent to its own actor over Ray, which unpickles every argument it
    # carries anyway.
    "honeycomb/backends/_actor.py pickle.loads",
}


def test_no_eval_exec_compile_pickle_or_unsafe_yaml() -> None:
    problems = []
    files = [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 30
    for path in files:
        where = path.relative_to(ROOT)
        for call in dangerous_calls(path.read_text()):  # "line N: pickle.loads"
            if f"{where} {call.partition(': ')[2]}" not in ALLOWED:
                problems.append(f"{where} {call}")
    assert problems == []
