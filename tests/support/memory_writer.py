"""A process that writes one memory file while others do: for the tests of
``SQLiteMemory`` across processes.

``python -m tests.support.memory_writer FILE WRITER COUNT START_AT`` waits until the
clock reads ``START_AT`` (so that every writer opens the file, new, at the same
moment), then adds ``COUNT`` memories ``writer WRITER memory I`` from 8 tasks at once,
searching between adds. Exit status 0 when every call succeeded; otherwise each error
is printed, one a line, and the status is 1.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from runtime import SQLiteMemory


async def write(path: Path, writer: str, count: int) -> list[str]:
    memory = SQLiteMemory(path)
    errors: list[str] = []
    todo = list(range(count))

    async def task() -> None:
        while todo:
            index = todo.pop()
            try:
                await memory.add(f"writer {writer} memory {index} about lisbon", namespace="shared")
                if index % 10 == 0:
                    await memory.search("lisbon memory", namespace="shared", k=3)
            except Exception as exc:  # every error is reported, none stops the others
                errors.append(f"{type(exc).__name__}: {exc}")

    async with asyncio.TaskGroup() as group:
        for _ in range(8):
            group.create_task(task())
    memory.close()
    return errors


def main() -> int:
    path, writer, count, start_at = (
        Path(sys.argv[1]),
        sys.argv[2],
        int(sys.argv[3]),
        float(sys.argv[4]),
    )
    time.sleep(max(0.0, start_at - time.time()))
    errors = asyncio.run(write(path, writer, count))
    for error in errors:
        print(error)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
