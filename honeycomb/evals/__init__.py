"""Evals: run a hive on a set of cases, score every answer and every run's behaviour,
and compare evals (docs/evals.md).

:func:`load_cases` reads a cases file (``evals.yaml``); :func:`evaluate` runs its
cases on an Executor and returns an :class:`EvalReport`; :func:`compare` tells what
changed between two reports. In Python, a check is any callable ``fn(answer, run)``.
"""

from honeycomb.evals.budget import EvalBudget
from honeycomb.evals.cases import Case, Cases, load_cases
from honeycomb.evals.checks import Check, CheckFn, Score, Verdict
from honeycomb.evals.compare import CaseChange, Comparison, compare
from honeycomb.evals.record import CaseRun, Judges, ToolUse
from honeycomb.evals.report import Attempt, CaseReport, EvalReport, junit
from honeycomb.evals.runner import Progress, assert_case, evaluate, new_eval_id

__all__ = [
    "Attempt",
    "Case",
    "CaseChange",
    "CaseReport",
    "CaseRun",
    "Cases",
    "Check",
    "CheckFn",
    "Comparison",
    "EvalBudget",
    "EvalReport",
    "Judges",
    "Progress",
    "Score",
    "ToolUse",
    "Verdict",
    "assert_case",
    "compare",
    "evaluate",
    "junit",
    "load_cases",
    "new_eval_id",
]
