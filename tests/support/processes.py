"""Runs in processes of their own, that kill themselves with SIGKILL at a chosen moment
(see the modules of ``tests.support`` that run as scripts)."""

from __future__ import annotations

import signal
import sys

import anyio

from tests.support import ROOT


async def killed(module: str, *args: str) -> None:
    """Run ``python -m module *args`` from the repository's root, and check that it was
    killed with SIGKILL (rather than ending, or failing before it got there)."""
    with anyio.fail_after(120):
        done = await anyio.run_process([sys.executable, "-m", module, *args], cwd=ROOT, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
