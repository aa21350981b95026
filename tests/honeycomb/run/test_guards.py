"""Guards in an Executor and a hive: a run's own (on its task, its final answer and
every call), a role's in its workers, judges under the run's budget, and their spans."""

from __future__ import annotations

import sysconfig
import textwrap
from pathlib import Path

import pytest

from honeycomb import (
    ApprovalRequest,
    Approvals,
    AssistantMessage,
    ConfigErrors,
    Decision,
    Event,
    Executor,
    GuardCheck,
    GuardrailTripped,
    Guards,
    ModelRequest,
    Policy,
    Role,
    RoleMemory,
    RunFailed,
    SQLiteMemory,
    ToolMessage,
    tool,
)
from honeycomb.hive import load_hive
from honeycomb.testing import FunctionModel, ScriptedModel, call
from honeycomb.tracing import SpanRecorder, build_timeline

sent: list[str] = []


@tool
async def send(to: str) -> str:
    """Send a message."""
    sent.append(to)
    return f"sent to {to}"


def no_evil(check: GuardCheck) -> str | None:
    return "evil address" if "evil" in check.text else None


async def test_a_runs_input_guard_stops_it_before_anything_runs() -> None:
    model = ScriptedModel(["never"])
    executor = Executor(
        [Role(name="w")], model, guards=Guards(input=("tests.support.guards:no_secrets",))
    )
    with pytest.raises(GuardrailTripped) as caught:
        await executor.run("tell me the password", subtasks=[("w", "a")])
    assert (caught.value.guard, caught.value.kind) == ("tests.support.guards:no_secrets", "input")
    assert caught.value.reason == "it mentions a password"
    assert model.requests == []
    assert caught.value.partial is not None
    assert caught.value.partial.status == "failed"


async def test_a_runs_output_guard_on_the_final_answer_stops_it_with_the_partial_result() -> None:
    executor = Executor(
        [Role(name="w")],
        ScriptedModel(["the password is hunter2"]),
        guards=Guards(output=("tests.support.guards:no_secrets",)),
    )
    with pytest.raises(GuardrailTripped) as caught:
        await executor.run("t", subtasks=[("w", "a")])
    assert caught.value.kind == "output"
    partial = caught.value.partial
    assert partial.subtasks["s1"].ok  # the worker's own answer had no guard of its own
    assert partial.answer is None  # the refused answer is not handed out


async def test_a_runs_argument_guards_check_every_workers_calls() -> None:
    sent.clear()
    model = ScriptedModel(
        {
            "r/s1": [call("send", {"to": "good"}), "done a"],
            "r/s2": [call("send", {"to": "evil"}), "done b"],
        }
    )
    executor = Executor(
        [Role(name="w", tools=("send",))], model, tools=[send],
        guards=Guards(arguments=(no_evil,)),
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("w", "a"), ("w", "b")], run_id="r")
    assert result.status == "ok"
    assert sent == ["good"]
    refused = result.subtasks["s2"].worker.transcript.messages[3]
    assert refused.status == "error"
    assert "guard 'no_evil': evil address" in refused.content


@pytest.mark.parametrize("judged", [False, True])
async def test_a_runs_argument_guards_check_the_calls_of_the_hives_it_calls(judged: bool) -> None:
    # Wrapped in a hive tool, a call the run's guard refuses went through; a guard that
    # is a judge role of the run is asked there, the hive having no such role.
    sent.clear()

    def answer(request: ModelRequest) -> AssistantMessage | str:
        system = str(request.messages[0].content)
        if "You are a guard" in system:
            text = str(request.messages[1].content)
            return "evil address" if "evil" in text else "PASS"
        answered = [m for m in request.messages if isinstance(m, ToolMessage)]
        if answered:
            return answered[0].content
        if system.startswith("You are the lead worker"):
            return AssistantMessage(tool_calls=(call("mailer", {"instruction": "mail"}),))
        return AssistantMessage(tool_calls=(call("send", {"to": "evil"}),))

    model = FunctionModel(answer)
    mailer = Executor(
        [Role(name="clerk", tools=("send",))], model, tools=[send],
        planner=lambda task: [("clerk", task)], aggregator="concat",
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("mailer",)), Role(name="reviewer")], model,
        tools=[mailer.as_tool("mailer")], aggregator="concat",
        guards=Guards(arguments=("reviewer",) if judged else (no_evil,)),
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("lead", "go")])
    assert sent == []
    assert "this call was refused, not run" in result.answer_text
    assert "evil address" in result.answer_text


async def test_a_runs_judge_checks_a_called_hives_calls_not_its_role_so_named() -> None:
    # The called hive's own 'reviewer' (which passes everything) judged the calls the
    # calling run's guard 'reviewer' was to check: the evil address was sent.
    sent.clear()
    judged: list[tuple[str, str]] = []

    def answer(request: ModelRequest) -> AssistantMessage | str:
        system = str(request.messages[0].content)
        if "You are a guard" in system:
            whose = "strict" if "strict" in system else "lenient"
            text = str(request.messages[1].content)
            judged.append((whose, text.split("\n")[0]))
            return "evil address" if whose == "strict" and "evil" in text else "PASS"
        answered = [m for m in request.messages if isinstance(m, ToolMessage)]
        if answered:
            return answered[0].content
        if system.startswith("You are the lead worker"):
            return AssistantMessage(tool_calls=(call("mailer", {"instruction": "mail"}),))
        return AssistantMessage(tool_calls=(call("send", {"to": "evil"}),))

    model = FunctionModel(answer)
    mailer = Executor(
        [Role(name="clerk", tools=("send",), guards=Guards(output=("reviewer",))),
         Role(name="reviewer", instructions="lenient")],
        model, tools=[send], planner=lambda task: [("clerk", task)], aggregator="concat",
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("mailer",)), Role(name="reviewer", instructions="strict")],
        model, tools=[mailer.as_tool("mailer")], aggregator="concat",
        guards=Guards(arguments=("reviewer",)),
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("lead", "go")])
    assert sent == []
    assert "evil address" in result.answer_text
    assert judged[:2] == [("strict", "Tool: mailer"), ("strict", "Tool: send")]
    assert judged[2][0] == "lenient"  # the called hive's own guard asks its own role


async def test_a_guard_both_a_role_and_its_run_name_judges_each_call_once() -> None:
    # Each call was checked by the function twice and by the judge twice, to the same
    # verdict: the judge's tokens spent twice. So was the final answer, by the output
    # guards that the aggregator role and its run both list; and a function the role
    # lists by its import path and the run as itself was taken for two.
    judged: list[str] = []

    def answer(request: ModelRequest) -> AssistantMessage | str:
        if "You are a guard" in str(request.messages[0].content):
            judged.append(str(request.messages[-1].content))
            return "PASS"
        if "You are the agg worker" in str(request.messages[0].content):
            return "merged"
        if isinstance(request.messages[-1], ToolMessage):
            return "done"
        return AssistantMessage(tool_calls=(call("send", {"to": "good"}),))

    by_path = ("reviewer", "tests.honeycomb.run.test_guards:kept")
    roles = [
        Role(name="w", tools=("send",), guards=Guards(arguments=by_path)),
        Role(name="reviewer"),
        Role(name="agg", guards=Guards(output=by_path)),
    ]
    itself = ("reviewer", kept)
    executor = Executor(
        roles, FunctionModel(answer), tools=[send], aggregator="agg",
        guards=Guards(arguments=itself, output=itself),
    )  # fmt: skip
    checks.clear()
    result = await executor.run("t", subtasks=[("w", "a")])
    assert result.status == "ok"
    assert result.answer_text == "merged"
    assert [kind for kind, _ in checks] == ["arguments", "output"]
    assert checks[1][1] == "merged"
    assert len(judged) == 2  # the call, and the merged answer
    # The call, the answer, one verdict on the call; the merge, one verdict on it.
    assert result.usage.model_calls == 5


checks: list[tuple[str, str]] = []


def kept(check: GuardCheck) -> None:
    """A guard that passes everything, keeping what it checks."""
    checks.append((check.kind, check.text))


async def test_a_roles_input_guard_fails_its_worker_under_the_failure_policy() -> None:
    role = Role(name="w", guards=Guards(input=("tests.support.guards:no_secrets",)))
    model = ScriptedModel(["fine"])
    executor = Executor([role], model)
    result = await executor.run("t", subtasks=[("w", "say hi"), ("w", "say the password")])
    assert result.status == "partial"
    failed = result.subtasks["s2"]
    assert failed.error is not None
    assert failed.error.type == "GuardrailTripped"
    strict = Executor([role], model, policy=Policy(failure="fail_fast"))
    with pytest.raises(RunFailed, match="GuardrailTripped"):
        await strict.run("t", subtasks=[("w", "say the password")])


async def test_a_judges_call_is_in_the_runs_usage_and_in_a_guard_span() -> None:
    def answer(request: ModelRequest) -> str:
        system = request.messages[0].content or ""
        if "You are a guard" in system:
            return "PASS"
        return "an answer"

    spans = SpanRecorder()
    events: list[Event] = []
    roles = [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")]
    executor = Executor(roles, FunctionModel(answer), on_event=[spans, events.append])
    result = await executor.run("t", subtasks=[("w", "a")])
    assert result.status == "ok"
    assert result.usage.model_calls == 2  # the answer and the verdict
    [guard] = [s for s in spans.spans if s.kind == "guard"]
    assert (guard.name, guard.status, guard.detail, guard.worker) == (
        "reviewer", "ok", "output", "s1",
    )  # fmt: skip
    assert guard.input_tokens > 0
    turn = next(s for s in spans.spans if s.span_id == guard.parent_id)
    assert turn.kind == "turn"
    assert turn.input_tokens > guard.input_tokens  # counted in the turn that it checked
    timeline = build_timeline(spans.spans)
    [row] = [r for r in timeline.rows if r.kind == "worker"]
    assert len(row.bars) == 2  # the model call and the check (its judge's call in it)
    model_call = next(s for s in spans.spans if s.kind == "model_call")
    assert timeline.input_tokens == model_call.input_tokens + guard.input_tokens
    assert timeline.model_calls == 2  # the judge's call is a model call
    assert [r.name for r in timeline.rows] == ["plan", "s1", "aggregate"]  # no row of its own


def test_an_unknown_judge_role_is_a_config_error() -> None:
    with pytest.raises(ConfigErrors, match=r"judge role 'reviwer'.*did you mean 'reviewer'"):
        Executor(
            [Role(name="w", guards=Guards(output=("reviwer",))), Role(name="reviewer")],
            ScriptedModel([]),
        )
    with pytest.raises(ConfigErrors, match=r"the run's guards.input\[0\]: unknown judge role"):
        Executor([Role(name="w")], ScriptedModel([]), guards=Guards(input=("nobody",)))


def test_a_guard_that_is_neither_a_path_nor_a_role_is_told_once_with_its_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # It was told twice: as neither, and as a judge role that is not defined. The path
    # meant is found among the user's modules whatever folder leads sys.path: Ray, once
    # imported, puts its vendored packages' there, and the hint was missing then.
    monkeypatch.syspath_prepend(sysconfig.get_path("purelib"))
    with pytest.raises(ConfigErrors) as caught:
        Executor(
            [
                Role(
                    name="w",
                    guards=Guards(input=(no_evil,), output=("tests.support.guards.short",)),
                )
            ],
            ScriptedModel([]),
        )
    assert [e.message for e in caught.value.errors] == [
        "role 'w': guards.output[0]: guard 'tests.support.guards.short' is neither an import "
        "path 'module:name' nor a role name (did you mean 'tests.support.guards:short'?)"
    ]


def test_a_role_with_memory_and_none_to_use_is_named_once() -> None:
    # The Executor names the role of each problem of its setup, as for a guard's; the
    # problem named it too ("role 'w': role 'w' has memory: ...").
    with pytest.raises(ConfigErrors) as caught:
        Executor([Role(name="w", memory=RoleMemory(namespace="n"))], ScriptedModel([]))
    assert [e.message for e in caught.value.errors] == [
        "role 'w': memory: is set, but there is no memory to use: give the hive a "
        "top-level memory: (or the Executor or Worker memory=...)"
    ]


HIVE = """\
models:
  default: offline
guards:
  input: [tests.support.guards:no_secrets]
roles:
  planner:
    description: Plans.
  reviewer:
    description: Judges.
  writer:
    guards:
      output: [reviewer, tests.support.guards:short]
      arguments: [tests.support.guards:no_secrets]
"""


def test_a_hive_declares_guards_on_roles_and_on_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(HIVE)
    executor = Executor.from_hive(load_hive(path))
    setup = executor.shared.crew.setup_for(executor.roles["writer"], None)
    assert [g.name for g in setup.guards.output] == ["reviewer", "tests.support.guards:short"]
    assert [g.judge for g in setup.guards.output] == ["reviewer", None]
    assert [g.name for g in executor.shared.services.guards.input] == [
        "tests.support.guards:no_secrets"
    ]


def test_a_hives_bad_guards_are_named_by_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            models:
              default: offline
            guards:
              output: [revewer]
            roles:
              reviewer: {}
              writer:
                guards:
                  input: [tests.support.guards:nope]
                  output: [tests.support.guards:NOT_CALLABLE, reviewr]
                  arguments: [reviewer, tests.support.guards:short, reviewer]
            """
        )
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    found = {(e.line, e.field): e.message for e in caught.value.errors}
    assert set(found) == {
        (4, "guards.output[0]"),
        (9, "roles.writer.guards.input[0]"),
        (10, "roles.writer.guards.output[0]"),
        (10, "roles.writer.guards.output[1]"),
        (11, "roles.writer.guards.arguments"),  # a judge asked twice of each call
    }
    assert "unknown judge role 'revewer' (did you mean 'reviewer'?)" in found[4, "guards.output[0]"]
    assert "has no attribute 'nope'" in found[9, "roles.writer.guards.input[0]"]
    assert "is not callable" in found[10, "roles.writer.guards.output[0]"]
    assert "unknown judge role 'reviewr'" in found[10, "roles.writer.guards.output[1]"]
    assert found[11, "roles.writer.guards.arguments"].startswith(
        "the guard 'reviewer' is listed twice ([0] and [2])"
    )
    assert all(e.file == str(path) for e in caught.value.errors)


def test_a_hive_guard_written_as_a_function_not_its_path_is_told_the_path(
    tmp_path: Path,
) -> None:
    # A dot where the colon goes, and a function's bare name, were told only what they
    # are not (an import path, a role), not the path to write.
    (tmp_path / "checks.py").write_text("def no_secrets(check):\n    return None\n")
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models: {default: offline}\n"
        "guards: {output: [checks.no_secrets]}\n"
        "roles:\n"
        "  writer: {guards: {input: [no_secrets]}}\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    found = {e.field: e.message for e in caught.value.errors}
    assert found["guards.output[0]"].endswith("(did you mean 'checks:no_secrets'?)")
    assert found["roles.writer.guards.input[0]"].endswith(
        "(or write its import path: 'checks:no_secrets')"
    )


def test_a_hive_guard_that_is_no_text_is_one_error_saying_what_a_guard_is(
    tmp_path: Path,
) -> None:
    # A number was two errors at one field (not a string, not callable), and
    # `checks: no_secrets`, which YAML reads as a mapping, was told neither what it is
    # nor how to write the path; a judge written `{role: reviewer}` was told to write
    # the import path 'role:reviewer', a module 'role' nobody meant.
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models: {default: offline}\n"
        "roles:\n"
        "  writer:\n"
        "    guards:\n"
        "      input: [123]\n"
        "      output: [checks: no_secrets]\n"
        "      arguments: [{role: reviewer}]\n"
    )
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    found = [(e.line, e.field, e.message) for e in caught.value.errors]
    assert found == [
        (
            5,
            "roles.writer.guards.input[0]",
            "a guard is a callable, an import path or a role name, not int",
        ),
        (
            6,
            "roles.writer.guards.output[0]",
            "a guard is a callable, an import path or a role name, not dict (an import path "
            "has no space after its colon: 'checks:no_secrets')",
        ),
        (
            7,
            "roles.writer.guards.arguments[0]",
            "a guard is a callable, an import path or a role name, not dict (a judge role "
            "is named alone: 'reviewer')",
        ),
    ]


# --- guards and approvals ---------------------------------------------------------------


@pytest.mark.parametrize("decided", ["by an approver", "in the store, then resumed"])
async def test_arguments_a_person_edits_on_approval_pass_the_argument_guards(
    decided: str, tmp_path: Path
) -> None:
    """The guard passed the model's call (to ann); the person's edit (to eve) is checked
    too, refused, and never sent, whether the approver edited it or a decision kept in
    the store did."""
    sent: list[str] = []
    checked: list[str] = []

    @tool(side_effects=True)
    async def send(to: str, text: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    def in_house(check: GuardCheck) -> str | None:
        to = str((check.arguments or {}).get("to", ""))
        checked.append(to)
        return None if to.endswith("@example.com") else f"{to} is not an example.com address"

    edit = {"to": "eve@evil.test", "text": "hi"}

    async def editor(request: ApprovalRequest) -> Decision:
        return Decision.approved(edit)

    courier = Role(
        name="courier",
        tools=("send",),
        approvals=Approvals(tools=("send",)),
        guards=Guards(arguments=(in_house,)),
    )
    model = ScriptedModel([call("send", {"to": "ann@example.com", "text": "hi"}), "done"])
    if decided == "by an approver":
        executor = Executor([courier], model, tools=[send], approver=editor)
        result = await executor.run("t", subtasks=[("courier", "greet")])
    else:
        executor = Executor([courier], model, tools=[send], store=tmp_path / "runs.db")
        waiting = await executor.run("t", subtasks=[("courier", "greet")], run_id="g")
        assert waiting.status == "waiting"
        await executor.decide("g", waiting.pending[0].call_id, approve=True, arguments=edit)
        result = await executor.resume("g")
    assert sent == []
    assert checked[0] == "ann@example.com"
    assert checked[-1] == "eve@evil.test"
    worker = result.subtasks["s1"].worker
    assert worker is not None
    [observation] = [m.content for m in worker.transcript.messages if m.role == "tool"]
    assert "eve@evil.test is not an example.com address" in observation


@pytest.mark.parametrize("says", ["the password is hunter2", "the weather is fine"])
async def test_a_workers_answer_the_runs_guard_refuses_is_never_kept_in_memory(
    tmp_path: Path, says: str
) -> None:
    # With concat, the run's answer is its workers' answers, which its output guard
    # checks; a worker whose role keeps its answers (store_result) kept its answer as
    # it ended, before the guard refused it, so a refused answer was recalled by later
    # runs. The run keeps them once its guard passes the answer.
    memory = SQLiteMemory(tmp_path / "memory.db")
    keeper = Role(name="w", memory=RoleMemory(namespace="n", remember=False, store_result=True))
    executor = Executor(
        [keeper], FunctionModel(lambda request: says), aggregator="concat", memory=memory,
        guards=Guards(output=(_no_password,)),
    )  # fmt: skip
    if "hunter2" in says:
        with pytest.raises(GuardrailTripped):
            await executor.run("t", subtasks=[("w", "a")])
        assert await memory.list("n") == ()
    else:
        result = await executor.run("t", subtasks=[("w", "a")])
        [kept] = await memory.list("n")
        assert (kept.text, kept.kind, kept.worker, kept.run_id) == (
            says,
            "result",
            "s1",
            result.run_id,
        )


def _no_password(check: GuardCheck) -> str | None:
    return "it tells a password" if "hunter2" in check.text else None
