"""Runs in processes of their own: ones that kill themselves with SIGKILL at a chosen
moment (see the modules of ``tests.support`` that run as scripts), and ones forked from
a process that imported Honeycomb once (:func:`forked`)."""

from __future__ import annotations

import multiprocessing
import os
import runpy
import signal
import sys
from multiprocessing.context import ForkServerContext
from pathlib import Path

import anyio

from tests.support import ROOT

__all__ = ["PRELOADED", "forked", "killed", "run_module"]

PRELOADED = ["tests.support.approvals", "tests.support.durable", "tests.support.processes"]
"""What the process the children are forked from imports once, before any fork: all of
Honeycomb, the scripts the children run, and this module (their target)."""


async def killed(module: str, *args: str) -> None:
    """Run ``python -m module *args`` from the repository's root, and check that it was
    killed with SIGKILL (rather than ending, or failing before it got there)."""
    with anyio.fail_after(120):
        done = await anyio.run_process([sys.executable, "-m", module, *args], cwd=ROOT, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


def forked() -> ForkServerContext:
    """multiprocessing's ``forkserver`` start method, its server importing
    :data:`PRELOADED` once: each child is a process of its own, forked from that server
    (never from the test process and its threads), without a Python to start and
    Honeycomb to import again, which cost most of a child's CPU. The server is started
    at the first child and lasts as long as the test process; it has the environment
    and folder of that moment."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    return context


def run_module(module: str, args: list[str], output: str) -> None:
    """Run ``module`` as ``python -m module *args`` would, in this process, its standard
    output and error written to the files ``output``.out and ``output``.err (the target
    of a :func:`forked` process: its exit status is the module's)."""
    for fd, suffix in ((1, "out"), (2, "err")):
        with Path(f"{output}.{suffix}").open("wb") as file:
            os.dup2(file.fileno(), fd)
    sys.argv = [module, *args]
    os.chdir(ROOT)  # for good: the server's folder may be a test's, gone since
    runpy.run_module(module, run_name="__main__", alter_sys=True)
