"""A model's (or a memory's embeddings') ``base_url`` without ``http://`` is an error
of the hive file, at its line, as the adapter's own check says it when the model is
made: ``validate`` said OK, and every call of the run then failed to reach it."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import main

HIVE = """\
models:
  default:
    model: llama3.1
    base_url: localhost:11434/v1
memory:
  embeddings:
    model: nomic-embed-text
    base_url: 127.0.0.1:11434/v1
roles:
  planner:
    description: Splits the task.
  writer:
    description: Writes.
"""


def test_a_base_url_without_http_is_an_error_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE)
    assert main(["validate", str(hive)]) == 1
    said = capsys.readouterr().out
    assert (
        f"{hive}:4:5: models.default.base_url: base_url 'localhost:11434/v1' has no http:// "
        "or https:// (write 'http://localhost:11434/v1')"
    ) in said
    assert f"{hive}:8:5: memory.embeddings.base_url: base_url '127.0.0.1:11434/v1'" in said


PASSWORD = "PWsecret1234567"


@pytest.mark.parametrize(
    ("base_url", "told"),
    [
        (
            f"u:{PASSWORD}@127.0.0.1:8000/v1",
            "base_url 'u:[password hidden]@127.0.0.1:8000/v1' has no http:// or https:// "
            "(write 'http://u:[password hidden]@127.0.0.1:8000/v1')",
        ),
        (
            f"//u:{PASSWORD}@h/v1?key=K{PASSWORD}",
            "base_url '//u:[password hidden]@h/v1?key=[password hidden]' has no http:// or "
            "https:// (write 'http://u:[password hidden]@h/v1?key=[password hidden]')",
        ),
        (
            f"http://u:{PASSWORD}@h/v1\r",
            "base_url 'http://u:[password hidden]@h/v1\\r' holds a line break or another "
            "control character (read with the end of its line?): remove it",
        ),
        (
            f"http://u:{PASSWORD}@h:99999/v1",
            "base_url 'http://u:[password hidden]@h:99999/v1' cannot be read as a URL (Port "
            "out of range 0-65535)",
        ),
        (
            f"http://u:{PASSWORD}@[h/v1",
            "base_url 'http://u:[password hidden]@[h/v1' cannot be read as a URL (Invalid "
            "IPv6 URL)",
        ),
        (
            f"https://u:{PASSWORD}@:443/v1",
            "base_url 'https://u:[password hidden]@:443/v1' names no host after its scheme "
            "(as http://localhost:8000/...)",
        ),
        (
            f"http://u:{PASSWORD}@/v1",
            "base_url 'http://u:[password hidden]@/v1' names no host after its scheme (as "
            "http://localhost:8000/...)",
        ),
    ],
)
def test_a_base_url_that_cannot_be_reached_is_told_without_its_password(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    base_url: str,
    told: str,
) -> None:
    """The password of a base_url written without its scheme was shown by the error
    that says to add one, in validate's output and in the ConfigError of the adapter
    made in Python; one with a line break (a Windows .env's \\r), an unreadable port
    or an unclosed [ passed validate, and every call failed with httpx's or
    urllib's own error (InvalidURL, ValueError), not one naming the field; one with
    no host was 'not an http:// or https:// URL (http://)', or (a port alone) passed
    and failed every call as 'Request URL is missing an 'http://' or 'https://'
    protocol', retried as a connection error."""
    from runtime import ConfigError, OpenAIModel

    monkeypatch.setenv("HIVE_TEST_URL", base_url)
    hive = tmp_path / "hive.yaml"
    hive.write_text(HIVE.replace("localhost:11434/v1", "${HIVE_TEST_URL}"))
    assert main(["validate", str(hive)]) == 1
    said = capsys.readouterr().out
    assert f"{hive}:4:5: models.default.base_url: {told}" in said
    assert PASSWORD not in said
    with pytest.raises(ConfigError) as caught:
        OpenAIModel("llama3.1", base_url=base_url)
    assert str(caught.value) == f"model 'llama3.1': {told}"
