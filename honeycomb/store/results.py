"""How a run's result is kept: each worker's result once, in its row.

A run writes its result without the results of the subtasks that finished (each is in
its worker's row already; see ``honeycomb/run/record.py``), and :func:`whole_result`
puts them back when the run is read, in plan order. A result that holds them all (as
stores of schema 3 and before kept it) is read as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from runtime import StoreError

__all__ = ["whole_result"]


def whole_result(
    kept: str, outcomes: Mapping[str, str | None], *, damaged: Callable[[str], StoreError]
) -> str:
    """The run's result JSON ``kept`` with the outcome of each of its subtasks, from
    ``outcomes`` (each worker's stored result, by subtask) where it lacks one.

    Raises:
        StoreError: ``damaged(subtask)``, for a subtask whose outcome is in neither.
    """
    result: dict[str, Any] = json.loads(kept)
    subtasks: dict[str, Any] = result.get("subtasks") or {}
    planned = [s["id"] for s in (result.get("plan") or {}).get("subtasks", ())]
    if all(sid in subtasks for sid in planned):
        return kept
    whole: dict[str, Any] = {}
    for sid in planned:
        found = subtasks.get(sid)
        if found is None:
            row = outcomes.get(sid)
            if row is None:
                raise damaged(sid)
            found = json.loads(row)
        whole[sid] = found
    result["subtasks"] = {**whole, **subtasks}
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))
