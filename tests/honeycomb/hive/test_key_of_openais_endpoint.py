"""A model on OpenAI's own endpoint needs an API key, whether its ``base_url`` is left
out or names that endpoint (``https://api.openai.com/v1``, as the starter's ``real``
model and docs/hive.md write it): ``validate`` warns of one none gives, and ``run``
refuses to start without it. A named base_url was taken for a local server's, so the
starter switched to ``default_model: real`` without a key validated clean, and its
run was kept and failed on OpenAI's 401 (or, offline, after its retries)."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb.cli.main import main


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HONEYCOMB_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_key")
def test_the_starter_on_its_real_model_without_a_key_is_told_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "myhive"]) == 0
    hive = tmp_path / "myhive" / "hive.yaml"
    written = hive.read_text()
    assert "base_url: ${OPENAI_BASE_URL:-https://api.openai.com/v1}" in written
    hive.write_text(written.replace("default_model: offline", "default_model: real"))
    capsys.readouterr()
    assert main(["validate", "myhive/hive.yaml"]) == 0  # the file is right: a warning
    warned = capsys.readouterr().out
    assert "  warning: myhive/hive.yaml:16:3: models.real: model 'gpt-4o-mini' needs an API " in (
        warned
    )
    assert main(["run", "myhive/hive.yaml", "--plain"]) == 2
    assert "models.real: model 'gpt-4o-mini' needs an API key: set OPENAI_API_KEY" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / ".honeycomb").exists()  # no run was kept


@pytest.mark.usefixtures("no_key")
@pytest.mark.parametrize(
    ("base_url", "warned"),
    [
        ("https://api.openai.com/v1", True),
        ("  HTTPS://API.OPENAI.COM/v1/  ", True),
        ("http://127.0.0.1:11434/v1", False),  # a local server takes any key
        ("https://openai.example.com/v1", False),
    ],
)
def test_a_base_url_naming_openai_needs_a_key_and_another_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base_url: str, warned: bool
) -> None:
    path = tmp_path / "hive.yaml"
    path.write_text(
        "models:\n  default: offline\n"
        f"  gpt: {{model: gpt-4o-mini, base_url: '{base_url}'}}\n"
        "roles:\n  planner: {description: Plans.}\n  w: {description: W., model: gpt}\n"
    )
    assert main(["validate", str(path)]) == 0
    assert ("needs an API key" in capsys.readouterr().out) is warned
