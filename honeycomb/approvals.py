"""Calls that wait for a person: a role's ``approvals:`` rules, the request an
approver is asked, its decision, the calls a waiting run holds, and where decisions
are kept (``docs/approvals.md``).

    from honeycomb.approvals import ApprovalEntry, PendingApproval

``Approvals``, ``ApprovalRequest``, ``Approver`` and ``Decision`` are in ``honeycomb``
too.
"""

from runtime.tools.approvals import (
    ApprovalEntry,
    ApprovalLog,
    ApprovalRequest,
    ApprovalRule,
    Approver,
    Decision,
    MemoryApprovalLog,
    PendingApproval,
)
from workers.role import Approvals

__all__ = [
    "ApprovalEntry",
    "ApprovalLog",
    "ApprovalRequest",
    "ApprovalRule",
    "Approvals",
    "Approver",
    "Decision",
    "MemoryApprovalLog",
    "PendingApproval",
]
