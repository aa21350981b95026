"""A compaction budget meets a local model's context: a budget that fills the context
of the model a role thinks with, or of the one that writes its summaries, is refused
as the Executor is made, and by a hive at its line (``honeycomb validate`` too). On the
real model (SmolLM2 at a 1,024-token context), every summary call of a 4,000-token
budget was refused by its server, so nothing was ever folded, and the worker's own
calls would have been refused as its context grew."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from honeycomb import Compaction, ConfigErrors, Executor, Role
from honeycomb.testing import FunctionModel
from runtime import WrapperModel
from tests.support.hives import errors_of


class Local(WrapperModel):
    """A model that says how many tokens one call of it holds, as a local one does."""

    def __init__(self, context_tokens: int) -> None:
        super().__init__(FunctionModel(lambda request: "ok"))
        self.context_tokens = context_tokens


def reader(budget: int, summarizer: str | None = None) -> Role:
    compaction = Compaction(budget_tokens=budget, model=summarizer, keep_turns=1)
    return Role(name="reader", compaction=compaction)


@pytest.mark.parametrize(
    ("models", "summarizer", "said"),
    [
        ({"default": Local(1024)}, None, "role 'reader' thinks with model 'default'"),
        (
            {"default": FunctionModel(lambda request: "ok"), "small": Local(1024)},
            "small",
            "role 'reader' summarizes with model 'small'",
        ),
    ],
)
def test_a_compaction_budget_that_fills_a_local_models_context_is_refused(
    models: dict[str, WrapperModel | FunctionModel], summarizer: str | None, said: str
) -> None:
    with pytest.raises(ConfigErrors) as refused:
        Executor([reader(4000, summarizer)], models)
    (error,) = refused.value.errors
    assert error.field == "roles.reader.compaction.budget_tokens"
    assert said in str(error)
    assert "a compaction budget of 4000 tokens leaves no room" in str(error)
    assert "which holds 1024" in str(error)
    assert "half of it, 512" in str(error)
    # The model as it is: one given in place of the hive's (--model local) is not the
    # one its name says, and its context is the model's own to raise.
    (local,) = [model for model in models.values() if isinstance(model, Local)]
    assert f"model '{'small' if summarizer else 'default'}' ({local!r}): " in str(error)
    assert str(error).endswith("or the model a larger context")
    Executor([reader(1000, summarizer)], models)  # within it: as it was


def test_a_model_that_says_no_context_takes_any_budget() -> None:
    Executor([reader(100_000)], FunctionModel(lambda request: "ok"))


@pytest.mark.parametrize(
    ("summarizer", "said"),
    [("", "the role thinks with model 'local'"), ("model: small", "summarizes with model 'small'")],
)
def test_a_hive_names_the_line_of_a_budget_that_fills_its_llama_models_context(
    tmp_path: Path, summarizer: str, said: str
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            models:
              local: {{provider: llama, context: {4096 if summarizer else 1024}}}
              small: {{provider: llama, context: 1024}}
            roles:
              planner:
                description: Plans.
              reader:
                description: Reads.
                compaction:
                  budget_tokens: 2048
                  {summarizer}
            """
        )
    )
    (error,) = errors_of(path)
    assert "hive.yaml:10:" in error
    assert "roles.reader.compaction.budget_tokens" in error
    assert said in error
    assert "a compaction budget of 2048 tokens leaves no room" in error
