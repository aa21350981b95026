"""``honeycomb serve``: the runs of a run store in a browser (the extra ``web``:
Starlette and uvicorn)."""

from honeycomb.web.app import Approvals, create_app
from honeycomb.web.approvals import RunTools, StoreApprovals
from honeycomb.web.guard import base_path, cookie_name, csrf_value, session_key

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
