"""The two calls everything goes through, a tool call and a model call, and the
layers around each, composed here and only here, outermost first.

A tool call::

    argument guards -> approval -> locks and slots -> journal -> trace -> the tool (its time limit)

- **Argument guards** first: a call a guard refuses is never shown to a person, and
  their verdicts on a whole turn come before any call of it runs. A call is judged
  once: one the run's record shows they passed (journaled, or asked about) is not
  judged again as a resumed turn goes on.
- **Approval** next: a person decides on calls that passed the guards, before any
  call of the turn runs; a call waiting for a decision pauses the worker with none
  of its calls run. An approval with edited arguments runs them, through every
  layer below, once the guards passed them too (an edit is no way around them).
- **Locks and slots**: an ``exclusive`` call holds its key's lock, a leaf call one
  of the run's tool slots, for as long as it runs (the dispatcher's per-turn cap
  comes before: which calls of a turn run together is its own).
- **Journal**: a side-effecting call's intent is made durable once it holds
  everything it needs to run, right before it runs, so a crash while it waits for a
  lock never leaves an intent of a call that never ran; a resumed worker's call the
  journal knows is answered from it, never run again, and has no span, whatever its
  tool is declared as now (so the layer is kept wherever there is a journal).
- **Trace**: the call's span covers its run alone, not its wait for a lock.
- **The tool** last: its context, its thread, its errors as observations, and its
  time limit, around the tool and nothing else: waiting for a lock or a slot, or for
  the journal's write, is not the tool's time.

Budget accounting of tool calls is not a layer: the loop reserves a turn's calls in
the run's budget before any of them runs (a turn that would go past a limit runs
none), once a turn, and gives back those that did not run (skipped repeats).

A model call::

    cost cap -> budget -> trace -> checked answer -> model slots
        -> [the model's own: cassette -> retries -> rate limit] -> the model

- **Cost cap** first (``cost_per_call`` of the run's budgets): it only reads the
  request, lowering its output limit to what its prompt leaves of the cap, so a call
  it refuses was never reserved, counted or traced.
- **Budget**: a call the budget refuses is never made, traced, or queued for
  a slot; one it allows is counted before it starts (no two workers slip past the
  last allowed call), is in flight while it runs, and is charged what it spent.
- **Trace**: the call's span, from its start to its answer or error, with the
  attempts its retries took (the retry policy reports them to it).
- **Checked answer**: the model is user code; what it raises becomes a
  ``ModelCallError`` and what it answers is checked once, here, so every layer
  outside sees a well-formed answer or a Honeycomb error.
- **Model slots**: the run's bound on model calls in flight (``LimitedModel``, put
  on each model by the Executor), held only by a call that will be made.
- **The model's own layers** are made with the model, innermost: a cassette that
  records its calls or replays them (``RecordingModel``, ``ReplayModel``) outermost of
  them, so that it keeps an answer once its retries are done and a replay stands for
  the whole model; retries (``RetryingModel``) around its rate limit
  (``RateLimitedModel``), so that each retry waits for the limiter again, and its
  price (``PricedModel``); the OpenAI adapters retry and pace inside themselves.
- **Streaming and guarded output** are the loop's: it asks for the text as it is
  written when someone listens, and holds an answer's text until its output guards
  pass it.

:func:`model_calls` composes them; a worker's loop gives them its turns, its
compaction its summary calls, and the run's judge its verdicts. The layers a worker
adds run around the call's one await (:mod:`runtime.models.layers.base`): before
it outermost first, after it innermost first, none holding a frame while the model
works; the model's own layers are models holding the next.

To add a layer: write it in a module of its own (a
:class:`~runtime.tools.layers.ToolLayer` overriding ``admit``, to see a turn's calls
before any runs, and/or ``__call__``, to wrap each call; or a
:class:`~runtime.models.layers.ModelLayer` overriding ``opened``, ``answered`` and/or
``failed``), and add one line here, where it belongs in the order; see
docs/layers.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from runtime.events import Caller
from runtime.limits import Budget, Slots
from runtime.model import Model
from runtime.models.layers import Budgeted, Checked, CostCap, ModelCalls, ModelLayer, price_of
from runtime.models.layers import Traced as TracedModel
from runtime.tools.approval_gate import ApprovalGate
from runtime.tools.define import Tool
from runtime.tools.dispatch import DispatchPolicy
from runtime.tools.journal import Journal
from runtime.tools.layers import (
    Approving,
    ArgumentGuards,
    CallGuard,
    Held,
    Journaled,
    LockTable,
    RunTool,
    ToolHandler,
    Traced,
)

__all__ = ["model_calls", "tool_calls"]


def tool_calls(
    policy: DispatchPolicy,
    caller: Caller,
    tools: Iterable[Tool[Any, Any]] = (),
    *,
    guard: CallGuard | None = None,
    gate: ApprovalGate | None = None,
    locks: LockTable | None = None,
    slots: Slots | None = None,
    journal: Journal | None = None,
    budget: Budget | None = None,
) -> ToolHandler:
    """A tool call's layers, in their order. A layer whose part is not given is left
    out, and so is one that no call of ``tools`` could need (no locks when none is
    exclusive and no slots bound them, no trace when nobody listens to ``caller``'s
    tracer as the calls are composed). A journal is kept even when none of them has
    side effects: a call of an earlier life it knows, of a tool since declared
    without, is answered from it, not run again.

    Args:
        policy: The default time limit and the longest output.
        caller: The worker and run making the calls, and where their events go.
        tools: The tools called (None of them: every layer that is given is kept).
        guard: The argument guards (a worker's and its run's).
        gate: Decides on the calls that need a person's approval.
        locks: The lock table of ``exclusive`` keys (default: one of its own).
        slots: Bounds the leaf tool calls in flight (the run's).
        journal: Where side-effecting calls are journaled (the worker's store).
        budget: The run's budget, which approved calls must still fit once a person
            decided (None: none is kept).
    """
    known = list(tools)
    scope = journal.scope if journal is not None else ""
    calls: ToolHandler = RunTool(caller, policy.max_output_chars, policy.default_timeout, scope)
    if caller.tracer.enabled:
        calls = Traced(calls, caller)
    if journal is not None:
        calls = Journaled(calls, journal)
    if slots is not None or not known or any(t.exclusive is not None for t in known):
        calls = Held(calls, locks if locks is not None else LockTable(), slots)
    if gate is not None:
        calls = Approving(calls, gate, guard, journal, budget)
    if guard is not None:
        calls = ArgumentGuards(calls, guard, journal, gate.log if gate is not None else None)
    return calls


def model_calls(
    model: Model,
    budget: Budget | None,
    who: str | None,
    *,
    kind: str = "turn",
    caller: Caller | None = None,
) -> ModelCalls:
    """A model call's layers, in their order, around ``model`` (with the layers it was
    made with inside it).

    Args:
        model: The model, its own layers (slots, rate limit, retries, price) in it.
        budget: The run's budget (None: none is kept).
        who: Whose calls they are (a worker, a judge role), as the calls in flight
            are reported.
        kind: What the calls are: ``turn``, ``summary``, ``session summary``, ``judge``.
        caller: Where the calls' spans go (None: they have none; a summary's or a
            judge's call is reported by events of its own). Nobody listening to its
            tracer as the calls are composed: they have none either.
    """
    traced = caller is not None and caller.tracer.enabled
    layers = _built_in(budget is not None, traced)
    cap = budget.limits.cost_per_call if budget is not None else None
    price = price_of(model) if cap is not None else None  # its layers walked only for a cap
    if cap is not None and price is not None:
        layers = (CostCap(cap, price), *layers)
    return ModelCalls(
        model, layers, budget=budget, caller=caller if traced else None, who=who, kind=kind
    )


@cache  # benchmarks A and E: the workers of every run share their layers
def _built_in(budgeted: bool, traced: bool) -> tuple[ModelLayer, ...]:
    """The layers that keep nothing of their own (they read the call), in their order."""
    layers: list[ModelLayer] = []
    if budgeted:
        layers.append(Budgeted())
    if traced:
        layers.append(TracedModel())
    layers.append(Checked())
    return tuple(layers)
