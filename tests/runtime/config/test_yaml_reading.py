"""The YAML reader reads regular files of a bounded size only: a pipe would wait for
a writer, a device (``/dev/zero``) never ends, and a file far larger than any
configuration would fill the memory; each is refused, naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime import ConfigError, load_yaml
from runtime.config.yaml_config import MAX_FILE_BYTES


def refusal(path: Path | str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_yaml(path)
    return str(caught.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.timeout(10)  # without the check, opening the pipe waits for a writer
def test_a_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    pipe = tmp_path / "hive.yaml"
    os.mkfifo(pipe)
    assert refusal(pipe) == f"{pipe}: cannot read the file: it is a pipe (FIFO), not a regular file"


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="no /dev/null here")
def test_a_device_is_refused() -> None:
    # /dev/null stands for /dev/zero, which never ends: read whole, it filled the memory.
    assert refusal("/dev/null") == (
        "/dev/null: cannot read the file: it is a device, not a regular file"
    )


def test_a_folder_is_refused(tmp_path: Path) -> None:
    assert (
        refusal(tmp_path) == f"{tmp_path}: cannot read the file: it is a folder, not a regular file"
    )


def test_a_file_larger_than_the_bound_is_refused_and_one_of_its_size_is_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "big.yaml"
    line = "# " + "x" * 98 + "\n"
    path.write_text("a: 1\n" + line * ((MAX_FILE_BYTES - 5) // len(line)))
    assert path.stat().st_size <= MAX_FILE_BYTES
    assert load_yaml(path).data == {"a": 1}

    with path.open("a") as more:
        more.write("#" * (MAX_FILE_BYTES + 1 - path.stat().st_size))
    assert refusal(path) == (
        f"{path}: the file is larger than 4 MiB, far more than a configuration needs: is it "
        "the file meant?"
    )
