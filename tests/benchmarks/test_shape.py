"""benchmarks.shape: how the library is laid out, counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.shape import ROOT, identifiers, naming, returns, runtime_root
from honeycomb import Executor


def test_a_return_is_a_module_entered_again_after_the_path_left_it() -> None:
    assert returns(["executor", "run", "worker", "loop", "dispatch"]) == 0
    assert returns(["run", "run", "worker"]) == 0  # frames of one module count once
    assert returns(["scheduler", "concurrency", "scheduler", "worker"]) == 1
    assert returns(["a", "b", "a", "c", "b", "a"]) == 3


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_concept_is_named_by_identifiers_not_by_prose(tmp_path: Path) -> None:
    for package in ("honeycomb", "runtime", "workers"):
        _write(tmp_path, f"{package}/__init__.py", "")
    _write(
        tmp_path,
        "runtime/prose.py",
        '"""Approvals, guards, the journal."""\n# approvals\nx = "journal"\n',
    )
    _write(tmp_path, "runtime/paths.py", "from runtime.tools.journal import Entry\n")
    _write(tmp_path, "workers/calls.py", "def run(x):\n    return x(guard=1)\n")
    _write(tmp_path, "honeycomb/run/gate.py", "class ApprovalGate:\n    pass\n")
    _write(tmp_path, "honeycomb/run/uses.py", "from x import Journal as J\nJ.approve\n")
    found = naming(tmp_path)
    assert found == {
        "approvals": ["honeycomb.run.gate", "honeycomb.run.uses"],
        "guards": ["workers.calls"],
        "journal": [],  # imported as J: the code says J
    }
    assert identifiers("f(a, key=b)") == {"f", "a", "key", "b"}


def test_the_flat_modules_of_runtime_are_its_files_but_init(tmp_path: Path) -> None:
    for name in ("__init__.py", "values.py", "_private.py", "models/__init__.py"):
        _write(tmp_path, f"runtime/{name}", "")
    assert runtime_root(tmp_path) == ["_private", "values"]


def test_the_demo_run_has_legs_to_the_model_and_to_the_tools() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.shape", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    figures = json.loads(done.stdout)
    legs = figures["legs"]
    assert {leg["kind"] for leg in legs} == {"model", "tool"}
    assert all(leg["modules"][0] == Executor.run.__module__ for leg in legs), legs
    assert figures["returns"] == sum(leg["returns"] for leg in legs)
    # The planner's, the workers' and the aggregator's model calls are legs of their own.
    model_legs = [leg["modules"] for leg in legs if leg["kind"] == "model"]
    assert len(model_legs) >= 3
    assert figures["runtime_root"] == len(runtime_root(ROOT))
