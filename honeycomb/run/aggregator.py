"""Aggregators merge the subtasks' results into the final answer.

- :class:`RoleAggregator`: an aggregator role that sees the task and every subtask's
  result with its role (optionally answering in an output schema).
- :class:`ConcatAggregator` (``"concat"``): the results one after another.
- :class:`FunctionAggregator`: any callable ``fn(task, results)``, sync or async.

A run asks its aggregator through :func:`aggregate`, which holds every aggregator to
one rule: with an ``output_type``, the answer is an object of that type (a role
answers in it; a function's or an Aggregator's answer is validated against it), and
an aggregator that fails, whatever it raised, fails the run with ``RunFailed``.
``"concat"`` makes text: it takes no ``output_type``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ValidationError

from honeycomb.run.context import RunContext, with_default_instructions
from honeycomb.run.handing import fit_results, reader_of
from honeycomb.run.phase_workers import run_phase_worker
from honeycomb.run.prompts import AGGREGATOR_INSTRUCTIONS, ResultEntry, aggregator_task
from honeycomb.run.result import SubtaskResult
from runtime import BudgetExceeded, ConfigError, GuardrailTripped, HoneycombError, RunFailed
from runtime.value import validation_summary
from workers import Role, WorkerResult
from workers.memory import keep_result

__all__ = [
    "Aggregator",
    "AggregatorLike",
    "ConcatAggregator",
    "FunctionAggregator",
    "RoleAggregator",
    "aggregate",
    "as_aggregator",
    "keep_answers",
]


@runtime_checkable
class Aggregator(Protocol):
    """Merges results into the final answer (text or an output-schema object).

    ``results`` holds every subtask's outcome, failures included, in plan order.

    Raises:
        RunFailed: when no answer can be made.
    """

    async def aggregate(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> Any: ...


class ConcatAggregator:
    """The successful results under their subtask ids, then a line naming failures."""

    async def aggregate(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> str:
        parts = [f"## {r.subtask.id} ({r.subtask.role})\n{r.text.strip()}" for r in results if r.ok]
        failed = [f"{r.subtask.id} ({r.error})" for r in results if not r.ok]
        if failed:
            parts.append("Failed subtasks: " + "; ".join(failed))
        return "\n\n".join(parts)


AggregateFunction: TypeAlias = Callable[[str, Sequence[SubtaskResult]], Awaitable[Any] | Any]


class FunctionAggregator:
    """The answer from ``fn(task, results)``, sync or async."""

    def __init__(self, fn: AggregateFunction) -> None:
        self.fn = fn

    async def aggregate(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> Any:
        answer = self.fn(task, results)
        return await answer if inspect.isawaitable(answer) else answer


class RoleAggregator:
    """Asks an aggregator role to merge the results.

    Args:
        role: The aggregator role's name.
        output_type: A pydantic model the answer must validate against.
    """

    def __init__(self, role: str = "aggregator", output_type: type[BaseModel] | None = None):
        self.role = role
        self.output_type = output_type

    async def aggregate(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> Any:
        return (await self.answered(task, results, context)).output

    async def answered(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> WorkerResult:
        """The aggregator worker's result: its ``output`` is the answer, and its
        ``cut_off`` says whether the answer ended at the output limit.

        Raises:
            RunFailed: when the worker did not answer.
            BudgetExceeded: when its call would have gone past the run's budget.
        """
        result, keep = await self.unkept(task, results, context)
        await keep()
        return result

    async def unkept(
        self, task: str, results: Sequence[SubtaskResult], context: RunContext
    ) -> tuple[WorkerResult, Callable[[], Awaitable[None]]]:
        """:meth:`answered`, its answer not yet kept in its role's memory
        (``store_result``): the second keeps it, once the run's output guards pass it.

        Raises:
            RunFailed: when the worker did not answer.
            BudgetExceeded: when its call would have gone past the run's budget.
        """
        role = with_default_instructions(context.roles[self.role], AGGREGATOR_INSTRUCTIONS)
        entries = [
            ResultEntry(
                id=r.subtask.id,
                role=r.subtask.role,
                ok=r.ok,
                text=r.handed_on if r.ok else r.why,
            )
            for r in results
        ]
        try:
            await context.crew.prepare([context.roles[self.role]])
        except HoneycombError as exc:  # its MCP tools cannot be had: it fails as a worker
            raise RunFailed(f"the aggregator failed: {exc}") from exc
        unkept = context.worker(role, output_type=self.output_type)
        conversation = context.conversation_for(context.roles[self.role], "full")
        prompt = fit_results(  # within what its model holds
            functools.partial(aggregator_task, task, conversation=conversation),
            entries,
            reader_of(context, unkept),
        )
        worker, result = await run_phase_worker(
            context,
            role,
            prompt,
            what="aggregate",
            keep=False,
            unkept=unkept,
            output_type=self.output_type,
        )
        if isinstance(result.exception, BudgetExceeded):
            raise result.exception
        if not result.ok:
            raise RunFailed(f"the aggregator failed: {result.error}")
        return result, functools.partial(worker.keep, result)


async def _kept() -> None:
    """Nothing to keep: the answer was not an aggregator role's."""


class Aggregated(NamedTuple):
    """The run's answer, whether it ended at the output limit (only an aggregator
    role's answer can say so), and what keeps it in the aggregator role's memory
    (``store_result``), to be awaited once the run's output guards pass it."""

    answer: Any
    cut_off: bool = False
    keep: Callable[[], Awaitable[None]] = _kept


async def aggregate(
    aggregator: Aggregator,
    task: str,
    results: Sequence[SubtaskResult],
    context: RunContext,
    output_type: type[BaseModel] | None,
) -> Aggregated:
    """The run's answer from its aggregator, whatever it is (a role, a function, your
    own Aggregator): with an ``output_type``, an object of that type.

    Raises:
        RunFailed: when the aggregator raised (an exception of its own, say a
            function's KeyError, is chained), returned None, or its answer does not
            validate as ``output_type`` (naming the type and every problem).
        BudgetExceeded, GuardrailTripped: as the aggregator raised them.
    """
    cut_off = False
    keep: Callable[[], Awaitable[None]] = _kept
    try:
        if isinstance(aggregator, RoleAggregator):  # its worker says if it was cut off
            ended, keep = await aggregator.unkept(task, results, context)
            answer, cut_off = ended.output, ended.cut_off
        else:
            answer = await aggregator.aggregate(task, results, context)
    except (BudgetExceeded, RunFailed, GuardrailTripped):
        raise  # the run's own stops: they carry its partial result as they are
    except Exception as exc:
        raise RunFailed(f"the aggregator failed: {type(exc).__name__}: {exc}") from exc
    if answer is None:  # a function without its return: no run answers nothing
        raise RunFailed(
            f"the aggregator {_named(aggregator)} returned None: return the run's answer "
            "(a string, or any value)"
        )
    if output_type is None or isinstance(answer, output_type):
        return Aggregated(answer, cut_off, keep)
    try:
        return Aggregated(output_type.model_validate(answer), cut_off, keep)
    except ValidationError as exc:
        raise RunFailed(
            f"the aggregator's answer is not a valid {output_type.__name__} (the Executor's "
            f"output_type): {validation_summary(exc)}"
        ) from exc


def _named(aggregator: Aggregator) -> str:
    """``aggregator`` as a person named it: its function, or its class."""
    if isinstance(aggregator, FunctionAggregator):
        return repr(getattr(aggregator.fn, "__name__", aggregator.fn))
    return type(aggregator).__name__


AggregatorLike: TypeAlias = Aggregator | str | Callable[..., Any]
"""What an Executor accepts as its aggregator."""


def aggregator_role(aggregator: Aggregator) -> str | None:
    """The role that merges with ``aggregator`` (None: a function or ``concat``)."""
    return aggregator.role if isinstance(aggregator, RoleAggregator) else None


def as_aggregator(
    spec: AggregatorLike | None, roles: Mapping[str, Role], output_type: type[BaseModel] | None
) -> Aggregator:
    """An aggregator from a role name, ``"concat"``, an Aggregator or a function; by
    default the role named ``aggregator`` if there is one, else ``concat``.

    Raises:
        ConfigError: when ``output_type`` is given and the aggregator is ``concat``,
            which makes text.
    """
    if spec is None and "aggregator" in roles:
        return RoleAggregator("aggregator", output_type)
    if spec is None or spec == "concat":
        if output_type is not None:
            chosen = "'concat'" if spec else "'concat' (there is no role named 'aggregator')"
            raise ConfigError(
                f"the aggregator is {chosen}, which makes text, not a "
                f"{output_type.__name__}: name an aggregator role, or pass a function or "
                f"an Aggregator whose answer validates as {output_type.__name__}",
                field="output_type",
            )
        return ConcatAggregator()
    if isinstance(spec, str):
        return RoleAggregator(spec, output_type)
    if isinstance(spec, Aggregator):
        return spec
    return FunctionAggregator(spec)


async def keep_answers(results: Sequence[SubtaskResult], context: RunContext) -> None:
    """Keep each subtask's answer in its role's memory (``store_result``), as its
    worker keeps it as it ends unless the run's answer is made of them: then the run
    keeps them once its output guards passed that answer
    (:attr:`~honeycomb.run.context.RunContext.holds_answers`), its earlier lives'
    included: each as it is handed on (one cut off at its output limit says so), as a
    worker keeps it. A memory that fails is logged, as a worker's is."""
    for result in results:
        role = context.roles.get(result.subtask.role)
        if role is not None and result.ok:
            memory = context.crew.setup_for(role, None, context.services.memory).memory
            await keep_result(
                memory,
                role.memory,
                result.handed_on,
                run_id=context.run_id,
                role=role.name,
                worker=result.subtask.id,
                timeout_s=role.tool_timeout,
            )
