"""Executor policies: parallelism, failure handling, budgets, timeouts, limiters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal, Self

from msgspec.structs import replace
from pydantic import ConfigDict, Field, model_validator

from honeycomb.run.conversation import SessionPolicy, sessions_within
from runtime import Limits, Model, OnUnknown
from runtime.models.layers import check_priced
from runtime.value import SettingsModel
from workers.state import DEFAULT_OUTPUT_TOKENS

if TYPE_CHECKING:
    from workers.role import Role

__all__ = ["Budgets", "FailurePolicy", "Policy", "priced_by_models", "quorum_problem"]

FailurePolicy = Literal["fail_fast", "best_effort", "quorum"]


Budgets = Limits
"""What one run may spend: :class:`~runtime.limits.Limits`, by the name of the
policy's field."""


class Policy(SettingsModel):
    """How an Executor runs its workers.

    Attributes:
        max_workers: Subtasks running at once in one run.
        failure: ``fail_fast`` cancels the rest at the first failure and raises
            ``RunFailed``; ``best_effort`` aggregates what succeeded and names what
            failed; ``quorum`` needs at least ``quorum`` successes (and stops early,
            raising ``RunFailed``, once that can no longer happen).
        quorum: Successes needed under ``failure: quorum``; at most ``max_subtasks``.
        worker_timeout_s: Seconds one worker may run; then it fails (others go on).
            Its waits for a person deciding on its calls are not counted.
        max_subtasks: Largest plan accepted from a planner model (a plan the caller
            gives, or a splitter function makes, is not bounded).
        plan_attempts: Times the planner may try for a valid plan.
        model_concurrency: Model calls in flight across all runs of the Executor.
        tool_concurrency: Tool calls in flight across all runs of the Executor.
        budgets: Per-run spending limits.
        on_unknown_outcome: In a resumed run, what to do about a side-effecting call
            that was running when the run stopped (a non-idempotent tool is never run
            again): ``tell`` the model its outcome is unknown, or ``fail`` the worker.
        approval_timeout_s: Seconds a call may wait for a person's approval; then it
            is denied (None: it waits as long as it takes).
        max_nesting: Agent tools (``agent:ROLE``) that may be nested inside one
            another: with 3, ``a → b → c → d`` is the deepest chain.
        max_output_tokens: The most tokens one answer of a model may take, for every
            role that sets no ``max_output_tokens`` of its own (its workers, and the
            aggregator). The planner's calls and the judges' are limited by what a
            plan of ``max_subtasks`` subtasks or a verdict can need, and compaction's
            summaries by their budget. A reasoning model counts its thinking in it.
        sessions: How sessions keep their conversations: the budget of tokens the
            conversation may take in a turn's requests, and how long sessions are
            kept (see ``docs/sessions.md``).
    """

    model_config = ConfigDict(
        defer_build=True, frozen=True, extra="forbid", protected_namespaces=()
    )  # fields named model_*: pydantic before 2.10 warns of each unless this is ()

    max_workers: int = Field(default=8, ge=1)
    failure: FailurePolicy = "best_effort"
    quorum: int | None = Field(default=None, ge=1)
    worker_timeout_s: float | None = Field(default=None, gt=0)
    max_subtasks: int = Field(default=20, ge=1)
    plan_attempts: int = Field(default=3, ge=1, le=10)
    model_concurrency: int | None = Field(default=None, ge=1)
    tool_concurrency: int | None = Field(default=None, ge=1)
    budgets: Limits = Field(default_factory=Limits)
    on_unknown_outcome: OnUnknown = "tell"
    approval_timeout_s: float | None = Field(default=None, gt=0)
    max_nesting: int = Field(default=3, ge=1, le=20)
    max_output_tokens: int = Field(default=DEFAULT_OUTPUT_TOKENS, ge=1)
    sessions: SessionPolicy = Field(default_factory=SessionPolicy)

    @model_validator(mode="after")
    def _quorum_goes_with_its_policy(self) -> Self:
        problem = quorum_problem(self.failure, self.quorum, self.max_subtasks)
        if problem is not None:
            raise ValueError(problem)
        return self

    def within(
        self,
        models: Iterable[Model],
        readers: Iterable[Role] = (),
        *,
        embeddings_priced: bool = False,
    ) -> Policy:
        """This policy for an Executor of ``models``: its sessions' conversation fits
        the smallest context among them and the compaction budgets of ``readers``, the
        roles shown it (:func:`sessions_within`).

        Raises:
            ConfigError: when the conversation's budget given fills that context; when
                a budget in dollars is set and nothing has a price to count
                (:func:`~runtime.models.layers.check_priced`): none of ``models``,
                nor, for ``cost``, its memory's embeddings (``embeddings_priced``).
        """
        models = list(models)
        check_priced(priced_by_models(self.budgets, embeddings_priced), models)
        sessions = sessions_within(self.sessions, models, readers)
        return self if sessions is self.sessions else self.model_copy(update={"sessions": sessions})


def priced_by_models(budgets: Limits, embeddings_priced: bool) -> Limits:
    """Of ``budgets``, the limits in dollars that only the models' prices can count: a
    memory's embeddings that have a price (``embeddings_priced``) spend ``cost`` too,
    not ``cost_per_call``, a model call's cap."""
    return replace(budgets, cost=None) if embeddings_priced else budgets


def quorum_problem(
    failure: FailurePolicy, quorum: object, max_subtasks: object = None
) -> str | None:
    """What is wrong with ``failure``, ``quorum`` and ``max_subtasks`` together, if
    anything: a quorum needs its policy, and a plan big enough to reach it.

    A rule of :class:`Policy` that a hive also checks on the values as written when
    other fields of the policy are invalid (and the rule did not run), so that every
    mistake is reported at once (``max_subtasks`` None: not compared).
    """
    if failure == "quorum" and quorum is None:
        return "failure: quorum needs 'quorum: K', the successes required"
    if failure != "quorum" and quorum is not None:
        return f"'quorum' is set but failure is {failure!r}; set failure: quorum"
    if isinstance(quorum, int) and isinstance(max_subtasks, int) and quorum > max_subtasks:
        return (
            f"quorum is {quorum} but max_subtasks is {max_subtasks}: a planner's plan has "
            "at most max_subtasks subtasks, so the quorum could never be reached; lower "
            "quorum or raise max_subtasks"
        )
    return None
