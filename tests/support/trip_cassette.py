"""Records the trip example's cassette on the real local model (SmolLM2-135M on
llama.cpp in this process), for tests/examples/test_trip_cassette.py to replay with
no model and no network::

    python -m tests.support.trip_cassette   # from the clone, with the local extra

It runs ``honeycomb run examples/trip/hive.yaml --model local --tool-protocol json``
as the command line would, with the worker timeout and wall-time budget lifted (a
busy CPU must not cut a worker off mid-recording: a call it never made could not be
replayed; neither enters what the model is sent), in a folder of its own (the outbox
the courier writes to is under it, written ``<cwd>`` in the cassette).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import msgspec

from honeycomb import Executor
from honeycomb.cli.local import SEED, short_answers
from honeycomb.hive import load_hive
from runtime.models.layers.cassette import cassette
from runtime.models.llama import LlamaModel
from runtime.models.protocols.json_tools import JsonToolModel
from tests.support import ROOT

__all__ = ["CASSETTE", "HIVE", "record"]

HIVE = ROOT / "examples" / "trip" / "hive.yaml"
CASSETTE = ROOT / "examples" / "trip" / "smollm2.cassette.jsonl"


async def record(path: Path = CASSETTE) -> str:
    """Record the trip's example task into ``path``; returns the run's status."""
    hive = load_hive(HIVE)
    short_answers(hive)
    policy = hive.spec.policy
    patient = policy.model_copy(
        update={
            "worker_timeout_s": None,
            "budgets": msgspec.structs.replace(policy.budgets, wall_time_s=None),
        }
    )
    llama = LlamaModel(seed=SEED)
    models = cassette(dict.fromkeys(hive.spec.models, JsonToolModel(llama)), record=path)
    async with Executor.from_hive(hive, models=models, policy=patient, store=None) as executor:
        result = await executor.run(hive.spec.example_task or "")
    unplaced(path, llama.server.path)
    return result.status


def unplaced(path: Path, gguf: Path) -> None:
    """The cassette ``path`` with the GGUF file named by its name alone: llama.cpp's
    answers name the model by the file's whole path, which is this machine's."""
    folder = msgspec.json.encode(f"{gguf.parent}/")[1:-1]
    path.write_bytes(path.read_bytes().replace(folder, b""))


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        status = asyncio.run(record())
    print(f"{CASSETTE.relative_to(ROOT)}: recorded a run that ended {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
