"""``honeycomb serve``: the runs of a run store in a browser (the extra ``web``:
Starlette and uvicorn)."""

from honeycomb.web.app import COOKIE, Approvals, create_app, csrf_value

__all__ = ["COOKIE", "Approvals", "create_app", "csrf_value"]
