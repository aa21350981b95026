"""The backend a run from the command line gets (``--backend``, ``--ray-address``, the
hive's ``backend:``), and a Ray pool's life around the run: started before it, its
actors stopped after it, and a Ray this process started shut down."""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pydantic

from honeycomb.cli.loop import stops_handled_by
from honeycomb.hive.backend import RAY_MISSING, BackendSpec, RaySpec, ray_missing
from runtime import ConfigError
from runtime.secrets import add_secret, url_secrets

if TYPE_CHECKING:
    from honeycomb.backends import RayBackend

__all__ = ["chosen_backend", "pool_running"]


def chosen_backend(declared: BackendSpec, args: argparse.Namespace) -> BackendSpec:
    """The backend the run gets: ``--ray-address`` (Ray there, the hive's other Ray
    settings kept), else ``--backend``, else the hive's ``backend:``.

    Raises:
        ConfigError: for ``--ray-address`` with ``--backend local``, or Ray not installed.
    """
    name, address = getattr(args, "backend", None), getattr(args, "ray_address", None)
    chosen = declared
    if address is not None:
        for secret in url_secrets(address):  # ray://user:PASSWORD@head: shown as the run goes
            add_secret(secret, "password")
        if name == "local":
            raise ConfigError(
                "--ray-address is for the Ray backend: drop --backend local (or --ray-address)"
            )
        # A named cluster: the local Ray's own setting (num_cpus) has no place there.
        settings = declared.ray.model_dump() if declared.ray is not None else {}
        try:
            ray = RaySpec.model_validate({**settings, "address": address, "num_cpus": None})
        except pydantic.ValidationError as exc:
            raise ConfigError(f"--ray-address {address!r}: {exc.errors()[0]['msg']}") from exc
        chosen = BackendSpec(ray=ray)
    elif name == "local":
        chosen = BackendSpec()
    elif name == "ray" and declared.ray is None:
        chosen = BackendSpec(ray=RaySpec())
    if chosen.ray is not None and declared.ray is None and ray_missing():
        raise ConfigError(f"--backend ray: {RAY_MISSING}")
    return chosen


@contextlib.asynccontextmanager
async def pool_running(pool: RayBackend) -> AsyncIterator[str | None]:
    """Start the pool before the run, so that a cluster that cannot be reached is told
    once, before any worker (the block gets what went wrong, or None); after the
    block, stop its actors, and a Ray this process started, whole: a Ctrl-C or SIGTERM
    meanwhile waits for that (a second or two), as the command ends anyway."""
    import ray

    ours = not ray.is_initialized()
    try:
        try:
            await pool.start()
        # Ray exits (SystemExit) when it cannot reach a cluster's GCS.
        except (Exception, SystemExit) as exc:
            yield _reason(exc)
        else:
            yield None
    finally:
        # Cut short, Ray's shutdown left its core worker half torn down, and Ray ended
        # the process with status 1 at once: no answer, no 130.
        with stops_handled_by(signal.SIG_IGN):  # the command is stopping
            pool.stop()
            if ours and ray.is_initialized():
                ray.shutdown()


def _reason(exc: BaseException) -> str:
    """Why Ray did not start, in a line."""
    if isinstance(exc, SystemExit):
        return "Ray did not start (it could not reach the cluster)"
    text = str(exc).strip().splitlines()
    return f"Ray did not start: {type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
