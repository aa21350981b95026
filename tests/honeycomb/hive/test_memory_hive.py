"""Memory in an Executor and a hive: answers kept with their run id and role, the
hive's top-level ``memory:`` and the roles' ``memory:``, and their mistakes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import structlog

from honeycomb import (
    AssistantMessage,
    ConfigErrors,
    Executor,
    ModelRequest,
    Policy,
    Role,
    RoleMemory,
    SQLiteMemory,
    ToolCall,
    ToolMessage,
)
from honeycomb.errors import MemoryStoreError
from honeycomb.hive import DEFAULT_MEMORY, load_hive
from honeycomb.testing import FunctionModel
from runtime.memory import db
from tests.support.hives import hive


def answer(request: ModelRequest) -> str:
    task = request.messages[1].content
    if "fail" in task:
        raise RuntimeError("this one fails")
    return f"found: {task.splitlines()[0]}"


async def test_store_result_keeps_each_good_answer_with_its_run_and_role(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "memory.db")
    roles = [
        Role(name="guide", memory=RoleMemory(namespace="trip", store_result=True, recall=0)),
        Role(name="scout", memory=RoleMemory(namespace="trip", recall=0)),  # keeps nothing
    ]
    executor = Executor(
        roles, FunctionModel(answer), memory=memory, policy=Policy(failure="best_effort")
    )
    subtasks = [
        {"id": "lisbon", "role": "guide", "instruction": "Lisbon sights"},
        {"id": "broken", "role": "guide", "instruction": "fail here"},
        {"id": "porto", "role": "scout", "instruction": "Porto sights"},
    ]
    result = await executor.run("trip", subtasks=subtasks, run_id="run-1")
    assert result.subtasks["broken"].status == "failed"
    [kept] = await memory.list("trip")
    assert kept.text == "found: Lisbon sights"
    assert (kept.kind, kept.run_id, kept.role, kept.worker) == (
        "result",
        "run-1",
        "guide",
        "lisbon",
    )


async def test_an_answer_that_cannot_be_kept_is_a_warning_and_the_run_stands(
    tmp_path: Path,
) -> None:
    not_memory = tmp_path / "notes.txt"
    not_memory.write_text("not a database" * 100)
    role = Role(name="guide", memory=RoleMemory(store_result=True, recall=0, remember=False))
    executor = Executor([role], FunctionModel(answer), memory=SQLiteMemory(not_memory))
    with structlog.testing.capture_logs() as logs:
        result = await executor.run("t", subtasks=[("guide", "Lisbon")], run_id="r2")
    assert result.status == "ok"
    [warning] = [entry for entry in logs if entry["event"] == "memory.store_failed"]
    assert warning["log_level"] == "warning"
    assert (warning["run_id"], warning["worker"]) == ("r2", "s1")
    assert "not a Honeycomb memory file" in warning["error"]


async def test_a_memory_given_as_a_path_is_an_sqlite_memory(tmp_path: Path) -> None:
    role = Role(name="guide", memory=RoleMemory())
    executor = Executor([role], FunctionModel(answer), memory=tmp_path / "m.db")
    assert isinstance(executor.memory, SQLiteMemory)
    assert executor.memory.path == tmp_path / "m.db"


def test_roles_with_memory_and_no_memory_are_named(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigErrors, match="role 'guide': memory: is set, but there is no memory to use"
    ):
        Executor([Role(name="guide", memory=RoleMemory())], FunctionModel(answer))


HIVE = """\
models: {default: offline}
memory:
  path: kept/memory.db
  max_chars: 500
  embeddings: {model: embed-small, base_url: "http://127.0.0.1:9/v1", api_key: sk-secret}
roles:
  guide:
    description: Finds things.
    memory: {namespace: trip, recall: 2, remember: true, store_result: true}
"""


def test_a_hive_declares_the_memory_and_its_roles_use_it(tmp_path: Path) -> None:
    pytest.importorskip("sqlite_vec")
    loaded = load_hive(hive(tmp_path, HIVE))
    assert loaded.memory_path == tmp_path / "kept" / "memory.db"  # beside the hive file
    executor = Executor.from_hive(loaded)
    memory = executor.memory
    assert isinstance(memory, SQLiteMemory)
    assert (memory.path, memory.max_chars) == (tmp_path / "kept" / "memory.db", 500)
    assert memory.embeddings is not None
    assert memory.embeddings.name == "embed-small"
    assert "sk-secret" not in repr(memory)
    guide = loaded.roles["guide"]
    assert guide.memory == RoleMemory(namespace="trip", recall=2, store_result=True)
    assert {"recall", "remember"} <= set(executor.shared.crew.setup_for(guide, None).tools.names)


def test_a_memory_without_a_path_is_under_the_current_folder(tmp_path: Path) -> None:
    loaded = load_hive(hive(tmp_path, "models: {default: offline}\nmemory: {}\nroles: {a: {}}\n"))
    assert loaded.memory_path == DEFAULT_MEMORY
    memory = loaded.memory()
    assert isinstance(memory, SQLiteMemory)
    assert memory.embeddings is None


def test_a_role_with_memory_in_a_hive_without_one_is_an_error_at_its_line(
    tmp_path: Path,
) -> None:
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        roles:
          guide:
            description: Finds things.
            memory: {namespace: trip}
        """,
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    [error] = caught.value.errors
    assert error.line == 5
    assert "role 'guide' has memory: but the hive declares no memory" in str(error)


@pytest.mark.parametrize(
    ("memory", "field"),
    [
        ("{path: m.db, max_chars: 10}", "max_chars"),
        ("{embeddings: {dimensions: 8}}", "model"),
        ("{pathh: m.db}", "pathh"),
    ],
)
def test_bad_memory_fields_are_named(tmp_path: Path, memory: str, field: str) -> None:
    path = hive(tmp_path, f"models: {{default: offline}}\nmemory: {memory}\nroles: {{a: {{}}}}\n")
    with pytest.raises(ConfigErrors, match=field):
        load_hive(path)


def test_a_bad_role_memory_is_named(tmp_path: Path) -> None:
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        memory: {}
        roles:
          guide: {description: x, memory: {namespace: "two words", recal: 2}}
        """,
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    text = str(caught.value)
    assert "namespace" in text
    assert "recal" in text


def test_embeddings_without_sqlite_vec_say_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "sqlite_vec" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigErrors) as caught:
        load_hive(hive(tmp_path, HIVE))
    [error] = caught.value.errors
    assert "pip install 'honeycomb-agents[memory]'" in str(error)
    assert error.line == 5  # embeddings:
    assert "sk-secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("lacking", "line", "said"),
    [
        ("_has_fts5", 2, "memory: memory search needs SQLite's FTS5"),
        ("_loads_extensions", 5, "memory.embeddings: semantic search loads sqlite-vec"),
    ],
)
def test_a_memory_this_sqlite_cannot_keep_is_named_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lacking: str, line: int, said: str
) -> None:
    """An SQLite without FTS5, or one that cannot load sqlite-vec (pyenv's builds): the
    hive does not load, naming the line, rather than each worker's recall failing."""
    pytest.importorskip("sqlite_vec")
    monkeypatch.setattr(db, lacking, lambda module: False)
    with pytest.raises(ConfigErrors) as caught:
        load_hive(hive(tmp_path, HIVE))
    [error] = caught.value.errors
    assert error.line == line
    assert said in str(error)
    assert "pip install 'honeycomb-agents[memory]'" in str(error)


async def test_a_hive_memory_file_that_is_not_one_is_refused_at_first_use(
    tmp_path: Path,
) -> None:
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "memory.db").write_text("not a database" * 100)
    text = HIVE.replace("  embeddings: {model: embed-small", "  # embeddings: {model: embed-small")
    memory = load_hive(hive(tmp_path, text)).memory()
    assert memory is not None
    with pytest.raises(MemoryStoreError, match="not a Honeycomb memory file"):
        await memory.list()


async def test_a_recall_is_a_span_of_its_worker_and_a_bar_of_its_row(tmp_path: Path) -> None:
    from honeycomb.trace.spans import SpanRecorder
    from honeycomb.trace.timeline import build_timeline

    memory = SQLiteMemory(tmp_path / "memory.db")
    await memory.add("Lisbon is sunny", namespace="trip")
    recorder = SpanRecorder()
    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    executor = Executor([role], FunctionModel(answer), memory=memory, aggregator="concat")
    await executor.run("t", subtasks=[("guide", "Lisbon")], on_event=[recorder])
    [worker] = [s for s in recorder.spans if s.kind == "worker"]
    [recall] = [s for s in recorder.spans if s.kind == "recall"]
    assert (recall.parent_id, recall.worker, recall.detail, recall.status) == (
        worker.span_id,
        worker.name,
        "trip",
        "ok",
    )
    assert worker.start <= recall.start <= recall.end <= worker.end
    [model_call] = [s for s in recorder.spans if s.kind == "model_call" and s.worker == "s1"]
    assert recall.end <= model_call.start  # before its first turn
    [row] = build_timeline(recorder.spans).workers
    assert [bar.name for bar in row.bars][:1] == ["recall"]


async def test_a_hives_priced_embeddings_count_in_its_runs_usage(tmp_path: Path) -> None:
    pytest.importorskip("sqlite_vec")
    from tests.support.openai_server import OpenAIServer

    with OpenAIServer() as server:
        text = HIVE.replace("http://127.0.0.1:9/v1", server.base_url).replace(
            "api_key: sk-secret}", "api_key: sk-secret, price: {input_per_mtok: 4.0}}"
        )
        executor = Executor.from_hive(load_hive(hive(tmp_path, text)))
        result = await executor.run("trip", subtasks=[("guide", "Lisbon sights")])
        inputs = [request.body["input"] for request in server.requests]
    assert result.status == "ok"
    assert len(inputs) >= 2  # its recall at its start, its answer kept (and its tools')
    tokens = sum(len(text.split()) for each in inputs for text in each)
    assert result.usage.cost == pytest.approx(tokens * 4.0 / 1e6)  # the models are free
    assert result.usage.input_tokens > tokens


def test_a_bad_embeddings_price_is_an_error_at_its_line(tmp_path: Path) -> None:
    text = HIVE.replace("api_key: sk-secret}", "price: {input_per_mtok: -1}}")
    with pytest.raises(ConfigErrors) as caught:
        load_hive(hive(tmp_path, text))
    [error] = caught.value.errors
    assert error.line == 5
    assert "memory.embeddings.price.input_per_mtok" in str(error)


async def test_a_roles_approvals_may_name_its_memorys_remember(tmp_path: Path) -> None:
    # The role's own approvals: {tools: [remember]} was refused as naming a tool the
    # role does not use: the memory's tools were not among its tools' names.
    path = hive(
        tmp_path,
        """\
        models: {default: offline}
        memory: {path: memory.db}
        store: runs.db
        roles:
          guide:
            description: Keeps what it learns.
            memory: {namespace: trip, recall: 0}
            approvals: {tools: [remember]}
        """,
    )
    note = ToolCall(id="c1", name="remember", arguments='{"text": "Lisbon is sunny"}')

    def remembers(request: ModelRequest) -> str | AssistantMessage:
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "kept"
        return AssistantMessage(tool_calls=(note,))

    def executor() -> Executor:
        return Executor.from_hive(load_hive(path), model=FunctionModel(remembers))

    memory = SQLiteMemory(tmp_path / "memory.db")
    waiting = await executor().run("trip", subtasks=[("guide", "Lisbon")], run_id="r1")
    assert [(p.tool, p.arguments) for p in waiting.pending] == [
        ("remember", {"text": "Lisbon is sunny"})
    ]
    assert await memory.list() == ()  # nothing kept before a person says so
    await executor().decide("r1", "c1", approve=True)
    assert (await executor().resume("r1")).status == "ok"
    assert (await executor().resume("r1")).status == "ok"  # ended: nothing run again
    assert [r.text for r in await memory.list()] == ["Lisbon is sunny"]
