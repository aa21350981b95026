"""A hive builds the models a run of it may call, and no other: one declared for later
(the demo's ``gpt``) costs nothing, not even its client's import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from honeycomb import Executor
from honeycomb.cli.main import demo_hive_path
from honeycomb.hive import load_hive
from tests.support.hives import errors_of, hive

USED_AND_NOT = """\
models:
  offline: {provider: offline, latency: 0}
  spare: {model: gpt-4o-mini, base_url: "http://127.0.0.1:9/v1"}
  writer: {model: gpt-4o-mini, base_url: "http://127.0.0.1:9/v1"}
  folder: {model: gpt-4o-mini, base_url: "http://127.0.0.1:9/v1"}
  summer: {model: gpt-4o-mini, base_url: "http://127.0.0.1:9/v1"}
roles:
  planner: {description: Plans.}
  scribe:
    description: Writes.
    model: writer
    compaction: {budget_tokens: 4000, model: folder}
policy:
  sessions: {context: {budget_tokens: 2000, model: summer}}
"""


def test_a_model_no_role_uses_is_not_built(tmp_path: Path) -> None:
    loaded = load_hive(hive(tmp_path, USED_AND_NOT))
    executor = Executor.from_hive(loaded)
    # The default, a role's own, a role's compaction's and the sessions' summarizer.
    assert list(executor.models) == ["offline", "writer", "folder", "summer"]
    assert list(loaded.models()) == ["offline", "writer", "folder", "summer"]


def test_the_demo_hive_loads_without_importing_its_unused_models_client() -> None:
    """The demo's ``gpt`` model, which no role of it uses, imported openai (about half
    a second of the demo's start) as every model of the hive was built."""
    script = (
        "import sys\n"
        "from honeycomb import Executor\n"
        f"executor = Executor.from_yaml({str(demo_hive_path())!r})\n"
        "print(sorted(executor.models), 'openai' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["['offline']", "False"]


def test_a_dollar_budget_that_only_an_unused_models_price_counts_is_refused(
    tmp_path: Path,
) -> None:
    """Its calls would all cost 0: the priced model is never called (nor built)."""
    text = USED_AND_NOT.replace(
        '  spare: {model: gpt-4o-mini, base_url: "http://127.0.0.1:9/v1"}',
        "  spare: {model: gpt-4o-mini, price: {input_per_mtok: 1, output_per_mtok: 2}}",
    ).replace("policy:\n", "policy:\n  budgets: {cost: 1}\n")
    (error,) = errors_of(hive(tmp_path, text))
    assert ":14:13: policy.budgets.cost: a budget in dollars counts the models' prices" in error


def test_the_sessions_summarizers_missing_key_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that only writes the sessions' summaries needs its key as much."""
    text = USED_AND_NOT.replace(
        '  summer: {model: gpt-4o-mini, base_url: "http://127.0.0.1:9/v1"}',
        "  summer: {model: gpt-4o-mini}",
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    (missing,) = load_hive(hive(tmp_path, text)).missing_keys()
    assert ":6:3: models.summer: model " in str(missing)
    assert "OPENAI_API_KEY" in str(missing)


def test_a_default_no_role_thinks_with_is_held_but_needs_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every role names its model: the default (the first declared) is never called,
    and its key was asked for all the same, refusing the run."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    text = """\
    models:
      gpt: {model: gpt-4o-mini}
      offline: {provider: offline, latency: 0}
    roles:
      planner: {description: Plans., model: offline}
      scribe: {description: Writes., model: offline}
    """
    loaded = load_hive(hive(tmp_path, text))
    assert loaded.missing_keys() == []
    assert loaded.models_used() == ["offline"]
    assert list(Executor.from_hive(loaded).models) == ["gpt", "offline"]  # its default
