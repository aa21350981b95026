"""What a guard's judge is shown: a judge is another model, so what it checks reaches
it with every secret masked, as a worker's answer handed on to another model does."""

from __future__ import annotations

from honeycomb import (
    AssistantMessage,
    Executor,
    GuardCheck,
    Guards,
    ModelRequest,
    Role,
    add_secret,
    tool,
)
from honeycomb.testing import FunctionModel, call
from runtime.secrets import isolated

SECRET = "hunter2-but-longer"


@tool
def connect(dsn: str) -> str:
    """Connect to a database."""
    return "connected"


async def test_a_judge_is_shown_no_secret_its_workers_instruction_answer_or_call_holds() -> None:
    """The worker is told the secret, calls a tool with it and quotes it in its answer:
    each judge (input, arguments, output; the role's and the run's) is shown it masked,
    while the tool is still called with it, and a function guard still reads it."""
    shown: list[str] = []
    read: list[str] = []

    def answers(request: ModelRequest) -> AssistantMessage | str:
        if "You are a guard" in (request.messages[0].content or ""):
            shown.append(request.messages[-1].content or "")
            return "PASS"
        if not any(m.role == "tool" for m in request.messages):
            dsn = f"postgres://app:{SECRET}@db/shop"
            return AssistantMessage(tool_calls=(call("connect", {"dsn": dsn}),))
        return f"Connected with {SECRET}."

    def reads(check: GuardCheck) -> None:
        read.append(check.text)

    checks = Guards(input=("checker",), output=("checker",), arguments=("checker", reads))
    worker = Role(name="worker", tools=("connect",), guards=checks)
    executor = Executor(
        [worker, Role(name="checker")], FunctionModel(answers), tools=[connect], guards=checks
    )
    with isolated():
        add_secret(SECRET, "password")
        result = await executor.run(f"Connect with {SECRET}.", subtasks=[("worker", SECRET)])
    assert result.status == "ok"
    assert len(shown) == 5  # the run's task, the instruction, the call, both answers
    assert all(SECRET not in text and "[password hidden]" in text for text in shown)
    assert [SECRET in text for text in read] == [True]
