"""The layers point downward only, and each package's public names are pinned."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import honeycomb
import runtime
import workers

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "runtime": {"workers", "honeycomb"},
    "workers": {"honeycomb"},
}


def imported_packages(package: str) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            found.update((str(path.relative_to(ROOT)), n.split(".")[0]) for n in names)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_dependencies_point_downward(package: str) -> None:
    bad = sorted((f, m) for f, m in imported_packages(package) if m in FORBIDDEN[package])
    assert bad == [], f"{package} must not import {FORBIDDEN[package]}: {bad}"


@pytest.mark.parametrize("module", [runtime, workers, honeycomb])
def test_all_names_exist_and_are_sorted(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert names == sorted(names)
    for name in names:
        assert hasattr(module, name), name


def test_runtime_public_names() -> None:
    assert set(runtime.__all__) == RUNTIME_NAMES


def test_workers_public_names() -> None:
    assert set(workers.__all__) == WORKERS_NAMES


def test_honeycomb_public_names() -> None:
    assert set(honeycomb.__all__) == HONEYCOMB_NAMES


RUNTIME_NAMES = {
    "AdaptiveLimiter", "AgentError", "ArgumentsError", "AssistantMessage", "Budget",
    "BudgetExceeded",
    "ConfigError", "ConfigErrors", "DispatchPolicy", "Dispatcher", "DuplicateToolError",
    "EmptyResponse", "Event", "EventHandler", "HoneycombError", "Journal", "JournalEntry",
    "LimitedModel", "Limits", "LockTable", "MaxTurnsExceeded", "MemoryJournal",
    "ModelCallError", "OnUnknown", "OutcomeUnknown",
    "RunawayLoop", "StoreError",
    "Message", "Model", "ModelCallFinished", "ModelCallRetrying", "ModelCallStarted",
    "ModelConnectionError",
    "ModelError", "ModelHTTPError", "ModelRequest", "ModelResponse", "ModelResponseError",
    "ModelRetry", "ModelTimeout", "ObservationStatus", "OpenAIModel", "OutputSchema",
    "OutputValidationError", "PlanError", "Price", "PricedModel", "RateLimitedModel",
    "RetryAfterPastDeadline", "RetryPolicy", "RetryingModel", "RunBusy", "RunFailed",
    "ScriptExhausted",
    "SystemMessage", "Tool", "ToolCall", "ToolCallFinished", "ToolCallStarted", "ToolContext",
    "ToolDefinitionError", "ToolError", "ToolMessage", "ToolRegistry", "ToolSchema",
    "Tracer", "Transcript", "UnknownToolError", "Usage", "UserMessage",
    "WrapperModel", "YamlDocument", "YamlPath", "check_cancelled", "did_you_mean",
    "format_path", "load_yaml", "parse_yaml", "tool",
    # the messages' boundaries: reading and writing them as dicts and JSON
    "Messages", "dump_messages", "dump_messages_json", "dump_value", "dump_value_json",
    "validate_messages", "validate_value",
}  # fmt: skip

WORKERS_NAMES = {
    "AgentLoop", "Checkpoint", "ContextWindow", "Continue", "Failed", "Final", "LoopSettings",
    "LoopState",
    "Role", "Step", "Worker", "WorkerError", "WorkerResult", "WorkerSetup", "assemble",
    "check_role",
    "format_task", "load_roles", "read_roles", "role_entries",
}  # fmt: skip

HONEYCOMB_NAMES = {
    "AdaptiveLimiter", "AggregationFinished", "AggregationStarted", "Aggregator",
    "BudgetExceeded", "Budgets",
    "ConcatAggregator", "ConfigError", "ConfigErrors", "Event", "Executor",
    "FunctionAggregator", "FunctionModel", "FunctionPlanner", "HoneycombError", "Limits",
    "Model", "ModelCallFinished", "ModelCallRetrying", "ModelCallStarted", "ModelError",
    "ModelRetry",
    "OfflineModel", "OpenAIModel", "Plan", "PlanError", "PlanReady", "Planner", "Policy",
    "RetryPolicy", "Role", "RoleAggregator", "RolePlanner", "RunBusy", "RunContext", "RunFailed",
    "RunFinished", "RunResult", "RunStarted", "RunStore", "RunStream", "RunSummary",
    "RunTimings", "ScriptedModel", "StaticPlanner", "StoreError", "Subtask", "SubtaskResult",
    "Tool", "ToolCallFinished",
    "ToolCallStarted", "ToolContext", "ToolRegistry", "Worker", "WorkerFinished",
    "WorkerResult", "WorkerStarted", "check_cancelled", "configure_logging", "load_roles",
    "tool",
}  # fmt: skip


# What `pip install honeycomb-agents` brings, by the module names the code imports.
BASE_MODULES = {
    "openai", "anyio", "sniffio", "pydantic", "pydantic_core", "structlog", "tenacity",
    "yaml", "rich",
}  # fmt: skip
EXTRA_MODULES = {"honeycomb/otel.py": {"opentelemetry"}}  # behind the `otel` extra


def test_the_library_imports_only_its_declared_dependencies() -> None:
    """The README's first command installs without the dev extra: a module that
    imports a package only the tests bring (httpx, say) would break it."""
    ours = {"runtime", "workers", "honeycomb"}
    problems = []
    for package in ours:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            allowed = BASE_MODULES | ours | EXTRA_MODULES.get(relative, set())
            for node in ast.walk(ast.parse(path.read_text())):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top not in allowed and top not in sys.stdlib_module_names:
                        problems.append(f"{relative}:{node.lineno} imports {name}")
    assert problems == []


def test_the_base_dependencies_are_declared() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~ \[]", d)[0].lower() for d in declared}
    assert names == {"openai", "anyio", "sniffio", "pydantic", "structlog", "tenacity",
                     "pyyaml", "rich"}  # fmt: skip


# What ``import honeycomb`` must not load: each loads with the first program that uses it.
LOADED_ON_FIRST_USE = (
    "openai", "tenacity", "yaml", "sqlite3", "difflib", "structlog", "anyio.streams.memory",
    "honeycomb.store", "honeycomb.durable", "honeycomb.offline", "runtime.yaml_config",
)  # fmt: skip


def test_importing_honeycomb_loads_only_what_every_program_needs() -> None:
    probe = "import sys, honeycomb; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    loaded = set(done.stdout.split())
    assert {"honeycomb", "runtime", "workers", "anyio", "pydantic"} <= loaded
    assert sorted(m for m in LOADED_ON_FIRST_USE if m in loaded) == []


@pytest.mark.parametrize(
    ("module", "name"),
    [("honeycomb", "RunStore"), ("honeycomb", "RunSummary"), ("runtime", "load_yaml"),
     ("runtime", "YamlDocument"), ("runtime", "format_path")],
)  # fmt: skip
def test_names_that_load_on_first_use_are_there(module: str, name: str) -> None:
    value = getattr(sys.modules[module], name)
    assert value.__name__ == name


def test_the_command_line_loads_the_openai_adapter_only_for_an_openai_model() -> None:
    probe = "import sys, honeycomb.cli; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    loaded = set(done.stdout.split())
    assert "honeycomb.hive" in loaded
    assert sorted(m for m in ("openai", "tenacity", "runtime.openai_model") if m in loaded) == []
