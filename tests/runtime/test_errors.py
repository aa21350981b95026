"""The error tree in runtime/errors.py: every class it draws exists, and every leaf is
raised by the code, so no documented error is one that never happens."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import re

import runtime
import runtime.errors
from tests.support import ROOT

TREE = re.findall(r"[├└]── (\w+)", runtime.errors.__doc__ or "")


def sources() -> str:
    files = [
        p for package in ("runtime", "workers", "honeycomb") for p in (ROOT / package).rglob("*.py")
    ]
    return "\n".join(p.read_text() for p in files if p.name != "errors.py")


def test_the_tree_draws_every_error_class() -> None:
    classes = {
        name
        for name in runtime.errors.__all__
        if isinstance(getattr(runtime.errors, name), type)
        and issubclass(getattr(runtime.errors, name), runtime.HoneycombError)
        and name != "HoneycombError"
    }
    assert set(TREE) == classes


def test_every_leaf_of_the_tree_is_raised_somewhere() -> None:
    code = sources()
    leaves = [
        name
        for name in TREE
        if not any(
            other is not getattr(runtime.errors, name)
            and issubclass(other, getattr(runtime.errors, name))
            for other in (getattr(runtime.errors, n) for n in TREE)
        )
    ]
    never = [name for name in leaves if not re.search(rf"\b{name}\(", code)]
    assert never == []


def every_module() -> None:
    """Import every module of the packages, so every error class is defined."""
    for package in ("runtime", "workers", "honeycomb"):
        found = importlib.import_module(package)
        for module in pkgutil.walk_packages(found.__path__, f"{package}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)


def subclasses(cls: type) -> set[type]:
    return {s for c in cls.__subclasses__() for s in {c, *subclasses(c)}}


def examples() -> list[runtime.HoneycombError]:
    """One of each error class, made as the code makes it, every field set."""
    from honeycomb.backends import RemoteFailure, WorkerLost

    e = runtime.errors
    http = e.ModelHTTPError(503, {"error": "busy"}, retry_after=2.0, model="m")
    busy = e.BudgetExceeded(
        "wall_time_s", 5.0, 5.2, in_flight=("w1 for 3s",), reached_by="a summary call"
    )
    busy.partial = {"s1": "done"}
    failed = e.RunFailed("every subtask failed")
    failed.partial = ("partial", 1)
    tripped = e.GuardrailTripped("no_secrets", "output", "a key", attempts=2)
    tripped.partial = "p"
    return [
        e.ConfigError("bad", file="hive.yaml", line=3, column=5, field="roles.r.tools[1]"),
        e.ConfigErrors([e.ConfigError("one", field="a"), e.ConfigError("two", line=2)]),
        e.ToolError("a tool could not be called"),
        e.ToolDefinitionError("stamp", "cannot read the signature"),
        e.DuplicateToolError("stamp"),
        e.UnknownToolError("stmp", ["stamp", "other"]),
        e.McpServerError("files", "exited with status 1"),
        e.ServerGone("files", "went away"),
        e.CallNotSent("notes", "no longer knew its session"),
        e.ModelError("a model call failed"),
        http,
        e.RetryAfterPastDeadline(http, deadline_left_s=1.5, attempts=3),
        e.ContextExceeded(
            {"type": "exceed_context_size_error", "n_prompt_tokens": 633, "n_ctx": 256},
            prompt_tokens=633,
            context_tokens=256,
            answer_tokens=10,
            hint="its prompt is 633 tokens, more than a call may hold: 256; give context 768",
            model="m",
        ),
        e.ModelConnectionError("refused", base_url="http://127.0.0.1:9"),
        e.ModelTimeout(120.0),
        e.ModelResponseError("no choices", retryable=True),
        e.StreamInterrupted("m", shown_chars=12, reason="ReadError: gone"),
        e.ModelCallError("m", ValueError("bug")),
        e.ModelServerError("small.gguf", "could not be loaded by llama.cpp"),
        e.ScriptExhausted("k", 3),
        e.CassetteError("not a line of a cassette", file="trip.jsonl", line=4),
        e.CassetteMismatch("trip.jsonl", "gpt", "tools: ...", worker="s1", case="lisbon"),
        e.CassetteMismatch("trip.jsonl", "embed-small", "text 1: ...", kind="embeddings"),
        e.AgentError("no answer"),
        e.EmptyResponse(2, wrap_up=True),
        e.AnswerWithheld(3, 120),
        e.MaxTurnsExceeded(5, ["search", "send"]),
        e.OutputValidationError("Answer", 3, "field 'x' missing"),
        e.OutputCutOff(4, 256),
        e.OutputCutOff(4, 12, capped=True),
        e.OutputCutOff(4, 12, own=True),
        e.OutputCutOff(4, 12, own=True, context=2048),
        e.ContextBudgetTooSmall(
            "s1", 600, 612, [("the system prompt and the task", 315), ("1 tool", 297)]
        ),
        e.RunawayLoop("search", 4),
        e.OutcomeUnknown("pay", "call_1"),
        e.NotStarted("s1/call_1", "MCP server 't' could not be started"),
        busy,
        e.PlanError(["s2: unknown role 'x'"], attempts=3),
        e.StoreError("cannot open", path="runs.db"),
        e.RunBusy("r1", path="runs.db", host="h", pid=7, heartbeat_age_s=2.5, expired=True),
        e.RunBusy("r1", path="runs.db", host="h", pid=7, heartbeat_age_s=2.5, here=True),
        e.RunMismatch("r1", "run 'r1' in runs.db was started with another task", task="t"),
        e.SessionError("turn 2 was interrupted", session_id="u-42", turn=2, run_id="r2"),
        e.SessionBusy("answering turn 3", session_id="u-42", turn=3, run_id="r3"),
        e.MemoryStoreError("not a memory file", path="m.db"),
        e.MemoryFeatureMissing("FTS5", "no FTS5", "install an SQLite with it", path="m.db"),
        failed,
        tripped,
        e.UnsupportedEventLoop("Executor.run"),
        e.EventLoopConflict("this Executor"),
        e.StreamBusy(),
        e.ApprovalError("r1", "call_1", "no such call"),
        e.AlreadyDecided("r1", "call_1", approved=False, decided_by="ann", decided_at=1.0),
        RemoteFailure("ValueError: boom"),
        WorkerLost("s1", "the actor died", role="r", deaths=3, tools=["crash"], limit=3),
    ]


def test_every_error_pickles_and_unpickles_equal() -> None:
    """An error crosses processes (from a Ray actor, say) as itself, its fields and
    message whole: made again from what was pickled, not from its message alone."""
    every_module()
    made = examples()
    assert {type(e) for e in made} == subclasses(runtime.HoneycombError)
    for error in made:
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error)
        assert (str(again), again.args) == (str(error), error.args)
        assert vars(again).keys() == vars(error).keys()
        assert repr(vars(again)) == repr(vars(error))


def test_an_html_page_answered_is_said_in_its_words_on_one_line_after_the_hint() -> None:
    """A web server's error page (a base_url without its /v1, a proxy's 502): its
    markup filled a dozen lines of the error, before the hint that said what to change."""
    page = (
        '<!DOCTYPE HTML>\n<html lang="en">\n    <head>\n        <meta charset="utf-8">\n'
        "        <title>Error response</title>\n    </head>\n    <body>\n"
        "        <h1>Error response</h1>\n        <p>Error code: 404</p>\n"
        "        <p>Message: Not Found &amp; gone.</p>\n    </body>\n</html>\n"
    )
    hint = "most OpenAI-compatible servers answer under /v1; try 'http://h/v1'"
    error = runtime.errors.ModelHTTPError(404, page, model="m", hint=hint)
    assert str(error) == (
        f"HTTP 404 from model 'm': {hint} (it answered a page: Error response Error code: "
        "404 Message: Not Found & gone.)"
    )
    assert error.body == page  # the server's own answer kept whole
    empty = "<html><head><title>502 Bad Gateway</title></head><body></body></html>"
    assert str(runtime.errors.ModelHTTPError(502, empty)) == (
        "HTTP 502: it answered a page: 502 Bad Gateway"
    )
    said = str(runtime.errors.ModelHTTPError(400, "not <html> at all", hint="h"))
    assert said == "HTTP 400: not <html> at all (h)"  # text that is not a page, as it is
