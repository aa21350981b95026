"""``honeycomb serve``: the runs of a run store in a browser (the extra ``web``:
Starlette and uvicorn)."""

from honeycomb.web.app import (
    Approvals,
    base_path,
    cookie_name,
    create_app,
    csrf_value,
    session_key,
)
from honeycomb.web.approvals import RunTools, StoreApprovals

__all__ = [
    "Approvals",
    "RunTools",
    "StoreApprovals",
    "base_path",
    "cookie_name",
    "create_app",
    "csrf_value",
    "session_key",
]
