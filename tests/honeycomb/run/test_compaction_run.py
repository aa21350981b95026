"""Compaction in a run: a role's ``compaction:`` in a hive file (and its mistakes),
the summary call retried by its model, traced as a span of its own and counted in
the run's cost, and a run stopped after a compaction that resumes from the stored
summary without summarizing again, its store holding the whole transcript."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import anyio
import pytest

from honeycomb import (
    AssistantMessage,
    BudgetExceeded,
    Budgets,
    Compaction,
    ConfigErrors,
    Executor,
    ModelRequest,
    ModelResponse,
    Policy,
    RetryPolicy,
    Role,
    Subtask,
    ToolCall,
    ToolMessage,
    Usage,
    tool,
)
from honeycomb.errors import ModelHTTPError
from honeycomb.hive import load_hive
from honeycomb.models import RetryingModel
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, call
from honeycomb.tracing import SpanRecorder
from tests.support.tokens import cjk
from workers.compaction import is_summary_request
from workers.context import token_counter

PAGE = "x" * 1600  # about 400 tokens a page
TASK = "read the log"
ONE = [Subtask(id="reader", role="reader", instruction=TASK)]


@tool
def read_page(page: int) -> str:
    """Read one page of the log."""
    return f"page {page}: fact-{page}\n{PAGE}"


def page_call(request: ModelRequest, pages: int) -> AssistantMessage | str:
    """The next page to read (counted from the summary and the results the request
    holds), or the answer once ``pages`` are read."""
    summary = next((m.content for m in request.messages if "[Summary" in (m.content or "")), "")
    read = summary.count("fact-") + sum(1 for m in request.messages if isinstance(m, ToolMessage))
    if read >= pages:
        return f"read {read} pages"
    page = read + 1
    return AssistantMessage(
        tool_calls=(ToolCall(id=f"c{page}", name="read_page", arguments=f'{{"page": {page}}}'),)
    )


def facts(request: ModelRequest) -> ModelResponse:
    """A summarizer: the facts of what it folds, at a price."""
    assert is_summary_request(request)
    found = sorted({w for w in request.messages[1].content.split() if w.startswith("fact-")})
    return ModelResponse(
        message=AssistantMessage(content="facts: " + " ".join(found)),
        usage=Usage(input_tokens=100, output_tokens=10, cost=0.25),
        model="summarizer-1",
    )


def reader(compaction: Compaction) -> Role:
    return Role(name="reader", tools=("read_page",), max_turns=30, compaction=compaction)


HIVE = """\
name: reading
models:
  offline: {provider: offline, latency: 0}
  short: {provider: offline, latency: 0}
default_model: offline
roles:
  reader:
    tools: [compaction_pages:read_page]
    compaction:
      budget_tokens: 2000
      trigger_tokens: 1500
      keep_turns: 2
      model: %s
      instructions: Keep every reading.
"""


def hive(tmp_path: Path, text: str) -> Path:
    (tmp_path / "compaction_pages.py").write_text(
        "from honeycomb import tool\n\n@tool\ndef read_page(page: int) -> str:\n"
        '    """Read one page."""\n    return str(page)\n'
    )
    path = tmp_path / "hive.yaml"
    path.write_text(text)
    return path


def test_a_hive_role_takes_a_compaction_with_its_own_summarizer(tmp_path: Path) -> None:
    path = hive(tmp_path, HIVE % "short")
    path.write_text(HIVE % "short")
    role = load_hive(path).roles["reader"]
    assert role.compaction == Compaction(
        budget_tokens=2000, trigger_tokens=1500, keep_turns=2, model="short",
        instructions="Keep every reading.",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("model", "line", "message"),
    [
        ("shrot", "13:7", "unknown model 'shrot' (did you mean 'short'?)"),
        ("short\n      budget: 10", "14:7", "unknown field 'budget'"),
    ],
)
def test_a_mistake_in_a_compaction_names_its_line_and_field(
    tmp_path: Path, model: str, line: str, message: str
) -> None:
    path = hive(tmp_path, HIVE % model)
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    text = str(caught.value)
    assert f"hive.yaml:{line}" in text, text
    assert "roles.reader.compaction" in text
    assert message in text


def test_a_hive_role_names_its_token_counter_by_import_path(tmp_path: Path) -> None:
    counted = (HIVE % "short").replace(
        "keep_turns: 2", "keep_turns: 2\n      token_counter: tests.support.tokens:cjk"
    )
    role = load_hive(hive(tmp_path, counted)).roles["reader"]
    assert role.compaction is not None
    assert token_counter(role.compaction) is cjk
    broken = counted.replace("tokens:cjk", "tokens:NOT_CALLABLE")
    with pytest.raises(ConfigErrors) as caught:
        load_hive(hive(tmp_path, broken))
    assert "hive.yaml:13:7" in str(caught.value)
    assert "roles.reader.compaction.token_counter" in str(caught.value)
    assert "is not callable" in str(caught.value)


async def test_a_token_counter_next_to_the_hive_measures_its_workers(tmp_path: Path) -> None:
    counted = (HIVE % "short").replace(
        "keep_turns: 2", "keep_turns: 2\n      token_counter: hive_tokens:count"
    )
    loaded = {}
    for name in ("one", "two"):  # two hives, each with a hive_tokens.py of its own
        (tmp_path / name).mkdir()
        (tmp_path / name / "hive_tokens.py").write_text(
            "seen = []\n\n\ndef count(text):\n    seen.append(text)\n    return len(text)\n"
        )
        loaded[name] = load_hive(hive(tmp_path / name, counted))
    executor = Executor.from_hive(loaded["two"], model=FunctionModel(lambda request: "done"))
    result = await executor.run("t", subtasks=[("reader", "read the log")])
    assert result.status == "ok"
    for name, used in (("one", False), ("two", True)):
        with loaded[name].imports():
            seen = importlib.import_module("hive_tokens").seen
        assert ("read the log" in seen) is used


def test_a_trigger_over_the_budget_names_both(tmp_path: Path) -> None:
    path = hive(tmp_path, (HIVE % "short").replace("trigger_tokens: 1500", "trigger_tokens: 5000"))
    with pytest.raises(ConfigErrors, match=r"trigger_tokens \(5000\) must not exceed"):
        load_hive(path)


async def test_the_summary_call_is_retried_traced_as_a_compaction_and_costed() -> None:
    failed = {"once": False}

    def flaky(request: ModelRequest) -> ModelResponse:
        if not failed["once"]:
            failed["once"] = True
            raise ModelHTTPError(503, "overloaded", model="summarizer")
        return facts(request)

    policy = RetryPolicy(attempts=3, initial_wait_s=0.0, jitter_s=0.0)
    summarizer = RetryingModel(FunctionModel(flaky, name="summarizer"), policy)
    worker = FunctionModel(lambda request: page_call(request, 10))
    recorder = SpanRecorder()
    executor = Executor(
        [reader(Compaction(budget_tokens=2500, keep_turns=2, model="summarizer"))],
        {"worker": worker, "summarizer": summarizer},
        tools=[read_page], aggregator="concat", default_model="worker",
    )  # fmt: skip
    result = await executor.run(TASK, subtasks=ONE, on_event=[recorder])

    assert result.status == "ok", [str(f.error) for f in result.failures]
    spans = [s for s in recorder.spans if s.kind == "compaction"]
    assert spans
    assert spans[0].attempts == 2  # the 503, then the summary
    assert all(s.status == "ok" and s.name == "summarizer-1" for s in spans)
    assert all(s.input_tokens == 100 and s.cost == 0.25 for s in spans)
    turns = {s.span_id: s for s in recorder.spans if s.kind == "turn"}
    assert all(turns[s.parent_id].worker == "reader" for s in spans)  # in the worker's turn
    assert result.usage.cost == pytest.approx(0.25 * len(spans))
    worker_calls = len(worker.requests)
    assert result.usage.model_calls == worker_calls + len(spans)


def stored_messages(rows: list[tuple[int, str]]) -> list[dict[str, object]]:
    """A worker's messages from the store's rows (each holds the messages from ``seq``)."""
    messages: list[dict[str, object]] = []
    for seq, text in rows:
        del messages[seq:]
        messages.extend(json.loads(text))
    return messages


async def test_a_run_resumed_after_a_compaction_does_not_summarize_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    compaction = Compaction(budget_tokens=2500, keep_turns=2, model="summarizer")
    stopped = anyio.Event()

    async def first_life(request: ModelRequest) -> AssistantMessage | str:
        if any("[Summary" in (m.content or "") for m in request.messages):
            read = sum(1 for m in request.messages if isinstance(m, ToolMessage))
            if read >= 2:  # compacted, and two turns since: stop here, mid-call
                stopped.set()
                await anyio.sleep_forever()
        return page_call(request, 12)

    summaries: list[ModelRequest] = []

    def summarize(request: ModelRequest) -> ModelResponse:
        summaries.append(request)
        return facts(request)

    def executor(worker: FunctionModel) -> Executor:
        return Executor(
            [reader(compaction)], {"worker": worker, "summarizer": FunctionModel(summarize)},
            tools=[read_page], aggregator="concat", default_model="worker", store=db,
        )  # fmt: skip

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: executor(FunctionModel(first_life)).run(TASK, subtasks=ONE, run_id="r1")
        )
        with anyio.fail_after(10):
            await stopped.wait()
        # Cancelled mid-call: the run records itself interrupted, after all it saved.
        tg.cancel_scope.cancel()
    made = len(summaries)
    assert made

    store = RunStore(db)
    stored = await store.load("r1")
    assert stored is not None
    worker = stored.workers["reader"]
    assert worker.state is not None
    assert worker.state["summary"].startswith("facts: fact-1")
    assert worker.state["summarized"] > 0
    kept = stored_messages(worker.messages)
    # The whole transcript: every page read so far, the folded ones too.
    pages = [m["content"] for m in kept if m["role"] == "tool"]
    assert [p.split(":")[0] for p in pages] == [f"page {i}" for i in range(1, len(pages) + 1)]
    assert len(pages) > worker.state["summarized"] // 2
    store.close()

    resumed = FunctionModel(lambda request: "answered from the summary")
    result = await executor(resumed).resume("r1")
    assert result.status == "ok", [str(f.error) for f in result.failures]
    assert len(summaries) == made  # nothing folded again
    (request,) = resumed.requests
    summary = request.messages[2].content
    assert summary.startswith("[Summary of the first")
    assert summary.endswith(worker.state["summary"])


def test_an_executor_names_a_summarizer_it_does_not_have() -> None:
    role = reader(Compaction(budget_tokens=2500, model="sumariser"))
    models = {"worker": FunctionModel(lambda r: "x"), "summariser": FunctionModel(facts)}
    with pytest.raises(ConfigErrors, match="role 'reader' summarizes with model 'sumariser'"):
        Executor([role], models, tools=[read_page], default_model="worker")


async def test_a_summary_the_budget_refuses_keeps_the_ones_made_before_it_in_the_turn() -> None:
    """Two summary calls failed, so a later turn needs two; the budget allows the
    first and refuses what comes next: the worker keeps the summary made (and what it
    cost), and its usage is the run's."""
    summaries = 0

    @tool
    def read(page: int) -> str:
        """Read a page."""
        return f"page {page}: " + "lorem ipsum dolor sit amet " * 40

    def answer(request: ModelRequest) -> str | AssistantMessage:
        nonlocal summaries
        if is_summary_request(request):
            summaries += 1
            if summaries <= 2:
                raise ModelHTTPError(500, "the summarizer is down")
            return "SUMMARY " + "x " * 10
        seen = [m for m in request.messages if m.role == "tool"]
        page = int(str(seen[-1].content).split(":")[0].split()[1]) + 1 if seen else 1
        if page > 8:
            return "done"
        return AssistantMessage(tool_calls=(call("read", {"page": page}),))

    compaction = Compaction(budget_tokens=600, keep_turns=1)
    role = Role(name="w", tools=("read",), max_turns=20, compaction=compaction)
    budgets = Policy(budgets=Budgets(model_calls=8))
    executor = Executor([role], FunctionModel(answer), tools=[read], policy=budgets)
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("t", subtasks=[("w", "x")])
    partial = stopped.value.partial
    assert partial is not None
    worker = partial.subtasks["s1"].worker
    assert worker is not None
    assert worker.usage.model_calls == partial.usage.model_calls == 8
    assert worker.usage.input_tokens == partial.usage.input_tokens
