"""A cap on what one model call may cost (``budgets.cost_per_call``): every call of a
run, on the model's price, has its output limit lowered to what its prompt leaves of
the cap; a call whose prompt alone would cost more stops the run, never made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honeycomb import (
    BudgetExceeded,
    Budgets,
    ConfigError,
    ConfigErrors,
    Executor,
    Policy,
    Role,
    RunFailed,
)
from honeycomb.hive import load_hive
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ModelResponse, ToolCall, Usage
from runtime.models.layers.cost_cap import prompt_tokens
from runtime.models.pricing import Price, PricedModel
from tests.support.hives import hive

PRICE = Price(input_per_mtok=1000.0, output_per_mtok=2000.0)  # $0.001 in, $0.002 out
CAP = 0.1


def priced(seen: list[ModelRequest]) -> PricedModel:
    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return "done"

    return PricedModel(FunctionModel(answer, name="priced"), PRICE)


async def test_every_call_of_a_run_is_held_to_the_cap() -> None:
    seen: list[ModelRequest] = []
    executor = Executor(
        [Role(name="w")], priced(seen), policy=Policy(budgets=Budgets(cost_per_call=CAP))
    )
    result = await executor.run("t", subtasks=[("w", "Say done.")])
    assert result.status == "ok"
    assert seen
    for request in seen:
        prompt = prompt_tokens(request) * 0.001
        assert request.max_output_tokens is not None
        assert prompt + request.max_output_tokens * 0.002 <= CAP  # no answer can pass it
    assert all(s.max_output_tokens < 4096 for s in seen)  # lowered: the cap, not the role


async def test_a_call_whose_prompt_alone_passes_the_cap_stops_the_run_unmade() -> None:
    seen: list[ModelRequest] = []
    executor = Executor(
        [Role(name="w")], priced(seen), policy=Policy(budgets=Budgets(cost_per_call=CAP))
    )
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("t", subtasks=[("w", "word " * 400)])
    assert stopped.value.limit == "cost_per_call"
    assert stopped.value.used > CAP
    assert str(stopped.value).startswith(  # nothing was used: it says what was refused
        f"budget exceeded: cost_per_call allows {CAP:g} a call, and the prompt of the next "
        f"call alone would cost {stopped.value.used:g} (raise cost_per_call"
    )
    assert seen == []  # never made, never counted
    assert stopped.value.partial is not None
    assert stopped.value.partial.usage.model_calls == 0


def test_a_hive_sets_the_cap_in_its_budgets(tmp_path: Path) -> None:
    path = hive(
        tmp_path,
        """
        models:
          default: {provider: offline, price: {input_per_mtok: 1, output_per_mtok: 2}}
        roles:
          w: {instructions: Work.}
        policy:
          budgets: {cost_per_call: 0.05}
        """,
    )
    assert load_hive(path).policy.budgets.cost_per_call == 0.05


def test_a_hive_with_a_budget_in_dollars_and_no_price_is_refused_at_its_line(
    tmp_path: Path,
) -> None:
    path = hive(
        tmp_path,
        """
        models:
          default: offline
        roles:
          w: {instructions: Work.}
        policy:
          budgets: {model_calls: 9, cost: 0.5}
        """,
    )
    with pytest.raises(ConfigErrors) as refused:
        load_hive(path)
    (error,) = refused.value.errors
    assert str(error).startswith(f"{path}:7:")  # the line of cost, as validate shows it
    assert "policy.budgets.cost" in str(error)
    assert "no model has one" in str(error)


@pytest.mark.parametrize("budgets", [Budgets(cost=1.0), Budgets(cost_per_call=0.1)])
def test_a_budget_in_dollars_with_no_priced_model_is_refused(budgets: Budgets) -> None:
    free = FunctionModel(lambda request: "done", name="free")
    with pytest.raises(ConfigError) as refused:
        Executor([Role(name="w")], {"a": free, "b": free}, policy=Policy(budgets=budgets))
    (limit,) = [name for name in ("cost", "cost_per_call") if getattr(budgets, name)]
    assert refused.value.field == f"policy.budgets.{limit}"
    assert "no model has one" in str(refused.value)
    assert "PricedModel" in str(refused.value)  # how to give one


async def test_a_model_without_a_price_beside_a_priced_one_costs_nothing() -> None:
    seen: list[ModelRequest] = []
    models = {"free": FunctionModel(lambda request: "done", name="free"), "paid": priced(seen)}
    executor = Executor([Role(name="w")], models, policy=Policy(budgets=Budgets(cost=1.0)))
    result = await executor.run("t", subtasks=[("w", "Say done.")])  # on the free one
    assert (result.status, result.usage.cost, seen) == ("ok", 0.0, [])


async def test_a_structured_answer_cut_at_the_limit_the_cap_left_says_so() -> None:
    whole = json.dumps({"title": "Bees", "points": ["they dance " * 5, "they fly " * 5]})

    def answer(request: ModelRequest) -> ModelResponse:
        limit = request.max_output_tokens or 0
        text = whole if len(whole) // 4 <= limit else whole[: limit * 4]  # cut, as a server
        return ModelResponse(
            message=AssistantMessage(content=text),
            usage=Usage(input_tokens=10, output_tokens=min(limit, len(whole) // 4)),
            finish_reason="stop" if text == whole else "length",
            model="cheap-in",
        )

    cheap_in = Price(input_per_mtok=10.0, output_per_mtok=2000.0)  # $0.002 an output token
    executor = Executor(
        [Role(name="w", output_schema="tests.support.role_tools:Summary")],
        PricedModel(FunctionModel(answer), cheap_in),
        policy=Policy(budgets=Budgets(cost_per_call=0.03)),  # about 15 tokens of answer
    )
    with pytest.raises(RunFailed) as failed:
        await executor.run("t", subtasks=[("w", "Sum up bees.")])
    error = failed.value.partial.subtasks["s1"].worker.error
    assert error is not None
    assert error.type == "OutputValidationError"
    assert "the limit budgets.cost_per_call left the call" in error.message  # not the model's
    assert "a limit of the model's own" not in error.message


async def test_an_answer_the_limit_the_cap_left_cut_to_nothing_says_so() -> None:
    def thinks_too_long(request: ModelRequest) -> ModelResponse:  # all of it reasoning
        limit = request.max_output_tokens or 0
        return ModelResponse(
            message=AssistantMessage(content=None, reasoning="hmm " * limit),
            usage=Usage(input_tokens=10, output_tokens=limit, reasoning_tokens=limit),
            finish_reason="length",
            model="thinker",
        )

    executor = Executor(
        [Role(name="w")],
        PricedModel(FunctionModel(thinks_too_long), Price(input_per_mtok=10, output_per_mtok=2000)),
        policy=Policy(budgets=Budgets(cost_per_call=0.03)),
    )
    with pytest.raises(RunFailed) as failed:
        await executor.run("t", subtasks=[("w", "Think.")])
    error = failed.value.partial.subtasks["s1"].worker.error
    assert error is not None
    assert error.type == "OutputCutOff"
    assert "budgets.cost_per_call left the call" in error.message
    assert "max_output_tokens" not in error.message  # raising it would change nothing


async def test_a_call_the_limit_the_cap_left_cut_short_is_told_that_limit() -> None:
    """A tool call cut off in its arguments at the lower limit a cost cap left its turn
    was told the role's limit (4096 tokens), which the model never had."""
    cut = '{"text": "a very long note that goes on'

    def answer(request: ModelRequest) -> ModelResponse | str:
        if any(m.role == "tool" for m in request.messages):
            return "saved"
        call = ToolCall(id="c1", name="save_note", arguments=cut)
        return ModelResponse(
            message=AssistantMessage(tool_calls=(call,)),
            usage=Usage(input_tokens=10, output_tokens=request.max_output_tokens or 0),
            finish_reason="length",
        )

    def save_note(text: str) -> str:
        """Save a note."""
        return "saved"

    model = FunctionModel(answer)
    executor = Executor(
        [Role(name="w", tools=("save_note",))],
        PricedModel(model, Price(input_per_mtok=10.0, output_per_mtok=2000.0)),
        tools=[save_note],
        aggregator="concat",
        policy=Policy(budgets=Budgets(cost_per_call=0.03)),  # about 15 tokens of answer
    )
    result = await executor.run("t", subtasks=[("w", "Save a long note.")])
    assert result.status == "ok"
    limit = model.requests[0].max_output_tokens
    assert limit is not None
    assert limit < 100
    [told] = [m for m in model.requests[1].messages if m.role == "tool"]
    assert f"cut off at its output limit ({limit} tokens) while writing them" in str(told.content)
