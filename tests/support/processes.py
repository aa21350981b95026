"""Runs in processes of their own: ones that kill themselves with SIGKILL at a chosen
moment (see the modules of ``tests.support`` that run as scripts), and ones forked from
a process that imported Honeycomb once (:func:`forked`)."""

from __future__ import annotations

import multiprocessing
import os
import runpy
import signal
import sys
import tempfile
import warnings
from multiprocessing.context import ForkServerContext
from pathlib import Path

import anyio

from tests.support import ROOT

__all__ = ["PRELOADED", "forked", "killed", "run_module"]

PRELOADED = [
    "tests.support.approvals",
    "tests.support.durable",
    "tests.support.early_kills",
    "tests.support.payments",
    "tests.support.processes",
    "tests.support.spending",
]
"""What the process the children are forked from imports once, before any fork: all of
Honeycomb, the scripts the children run, and this module (their target)."""


async def killed(module: str, *args: str) -> None:
    """Run ``module`` as ``python -m module *args`` would, in a process of its own
    (:func:`forked`), and check that it was killed with SIGKILL (rather than ending, or
    failing before it got there)."""
    exitcode, said = await anyio.to_thread.run_sync(_ended, module, list(args))
    assert exitcode == -signal.SIGKILL, said


def _ended(module: str, args: list[str]) -> tuple[int | None, str]:
    """The exit status of ``module`` run in a :func:`forked` process (None: it was still
    going after two minutes, and is killed), and what it wrote to its standard error."""
    with tempfile.TemporaryDirectory() as folder:
        output = str(Path(folder) / "child")
        child = forked().Process(target=run_module, args=(module, args, output))
        child.start()
        child.join(timeout=120)
        exitcode = child.exitcode
        if exitcode is None:
            child.kill()
            child.join()
        return exitcode, Path(f"{output}.err").read_text()


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
    # The server imported the module already, on purpose: runpy runs it anew, as __main__.
    warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
    os.chdir(ROOT)  # for good: the server's folder may be a test's, gone since
    runpy.run_module(module, run_name="__main__", alter_sys=True)
