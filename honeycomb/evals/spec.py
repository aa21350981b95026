"""What a cases file (``evals.yaml``) may say, field by field: the pydantic models it
is checked against, so that each mistake is told at its file, line and field, as a
hive's are (docs/evals.md).

Every check is a mapping with one kind key (``contains: Lisbon``) and, beside it,
an optional ``weight`` and ``threshold``.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime import did_you_mean

__all__ = [
    "KINDS",
    "Amount",
    "CaseSpec",
    "CasesSpec",
    "CheckSpec",
    "Count",
    "DefaultsSpec",
    "JsonSpec",
    "JudgeSpec",
    "Latency",
    "Texts",
    "ToolCalled",
]

_STRICT = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Texts(BaseModel):
    """Texts to look for: ``all`` of them, or ``any`` of them. Written as one text, or
    a list (all of it), or ``{any: [...]}`` / ``{all: [...]}``."""

    model_config = _STRICT

    all: tuple[str, ...] = ()
    any: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _short(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"all": [data]}
        if isinstance(data, list):
            return {"all": data}
        return data

    @model_validator(mode="after")
    def _one(self) -> Self:
        if bool(self.all) == bool(self.any):
            raise ValueError("give the texts as all: [...] or any: [...] (one of them, not empty)")
        return self


class Count(BaseModel):
    """How many times: ``at_least`` and/or ``at_most`` (a bare number: exactly)."""

    model_config = _STRICT

    at_least: int | None = Field(default=None, ge=0)
    at_most: int | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _exactly(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"at_least": data, "at_most": data}
        return data

    @model_validator(mode="after")
    def _some(self) -> Self:
        if self.at_least is None and self.at_most is None:
            raise ValueError("give at_least:, at_most: or both")
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            raise ValueError(f"at_least ({self.at_least}) is above at_most ({self.at_most})")
        return self


class Amount(BaseModel):
    """A bound on an amount (cost, tokens, model calls): ``at_most`` and/or ``at_least``
    (a bare number: at most)."""

    model_config = _STRICT

    at_most: float | None = Field(default=None, ge=0)
    at_least: float | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _at_most(cls, data: Any) -> Any:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return {"at_most": data}
        return data

    @model_validator(mode="after")
    def _some(self) -> Self:
        if self.at_least is None and self.at_most is None:
            raise ValueError("give at_most:, at_least: or both")
        return self


class Latency(Amount):
    """A bound on a run's time in seconds: its wall time, or its critical path
    (``of: critical_path``: what no schedule could beat)."""

    of: Literal["wall", "critical_path"] = "wall"


class ToolCalled(BaseModel):
    """A tool the run called: by ``name``, with ``args`` (the values given must be
    among the call's arguments: a subset), by a worker of ``role``, ``at_least``
    (default 1; 0 with ``at_most: 0``: never) and ``at_most`` times (the calls that
    match all of these)."""

    model_config = _STRICT

    name: str = Field(min_length=1)
    args: dict[str, Any] | None = None
    role: str | None = None
    at_least: int = Field(default=1, ge=0)
    at_most: int | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _named(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("at_most") == 0 and "at_least" not in data:
            return {**data, "at_least": 0}  # at most 0 times: never
        return {"name": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.at_most is not None and self.at_least > self.at_most:
            raise ValueError(f"at_least ({self.at_least}) is above at_most ({self.at_most})")
        return self


class JsonSpec(BaseModel):
    """The answer is JSON; with ``schema``, valid against that JSON schema, or with
    ``schema: output_schema``, against the hive's aggregator's ``output_schema``."""

    model_config = _STRICT

    json_schema: dict[str, Any] | Literal["output_schema"] | None = Field(
        default=None, alias="schema"
    )

    @model_validator(mode="before")
    @classmethod
    def _short(cls, data: Any) -> Any:
        if data is True:
            return {}
        if data == "output_schema":
            return {"schema": "output_schema"}
        return data


class JudgeSpec(BaseModel):
    """A role grades the answer by ``rubric``: one tool-less call of the role's model,
    whose cost is the eval's, not the run's. ``role`` names a role of the hive, or of
    the cases file's ``judges:`` hive."""

    model_config = _STRICT

    role: str = Field(min_length=1)
    rubric: str = Field(min_length=1)


KINDS = (
    "equals",
    "contains",
    "icontains",
    "not_contains",
    "regex",
    "json",
    "python",
    "judge",
    "status",
    "tool_called",
    "side_effects",
    "cost",
    "latency",
    "tokens",
    "model_calls",
)
"""The kinds of check a cases file may write (docs/evals.md says each)."""


class CheckSpec(BaseModel):
    """One check: exactly one of the kinds, with its ``weight`` in the case's score
    and the ``threshold`` its score must reach to pass (checks that pass or fail
    score 1 or 0; a ``python`` check may return a score between)."""

    model_config = ConfigDict(**_STRICT, protected_namespaces=())  # model_calls: a kind

    equals: Any = None
    contains: Texts | None = None
    icontains: Texts | None = None
    not_contains: Texts | None = None
    regex: str | None = None
    json_check: JsonSpec | None = Field(default=None, alias="json")
    python: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")
    judge: JudgeSpec | None = None
    status: tuple[str, ...] | None = None
    tool_called: ToolCalled | None = None
    side_effects: Count | None = None
    cost: Amount | None = None
    latency: Latency | None = None
    tokens: Amount | None = None
    model_calls: Amount | None = None
    weight: float = Field(default=1.0, ge=0)
    threshold: float = Field(default=1.0, ge=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _one_kind(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"a check is a mapping with one of: {', '.join(KINDS)}")
        kinds = [k for k in data if k in KINDS]
        if len(kinds) != 1:
            others = [str(k) for k in data if k not in KINDS and k not in cls.model_fields]
            if not kinds and others:
                raise ValueError(
                    f"{others[0]!r} is no kind of check{did_you_mean(others[0], KINDS)}; "
                    f"the kinds: {', '.join(KINDS)}"
                )
            said = f"it has {', '.join(kinds)}" if kinds else "it has none"
            raise ValueError(f"a check has exactly one of: {', '.join(KINDS)} ({said})")
        if isinstance(data.get("status"), str):
            data = {**data, "status": [data["status"]]}
        return data

    @field_validator("regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from exc
        return pattern

    @functools.cached_property
    def kind(self) -> str:
        """Which kind of check it is."""
        return next(k for k in KINDS if _field(k) in self.model_fields_set)


def _field(kind: str) -> str:
    """The field a kind of check is held in (``json`` is a name pydantic keeps)."""
    return "json_check" if kind == "json" else kind


class DefaultsSpec(BaseModel):
    """What every case gets: a ``task`` template for cases that give none, ``vars``
    (a case's own win), checks run before the case's own, a ``threshold``."""

    model_config = _STRICT

    task: str | None = None
    vars: dict[str, Any] = Field(default_factory=dict)
    checks: tuple[CheckSpec, ...] = Field(default=(), alias="assert")
    threshold: float | None = Field(default=None, ge=0, le=1)


class CaseSpec(BaseModel):
    """One case: its ``task`` (``{{name}}`` takes a var's value), the ``expected``
    answer (``{{expected}}`` in a check, or an ``equals`` with no value), its checks
    (``assert:``), and the ``threshold`` its weighted score must reach (none: every
    check must pass)."""

    model_config = _STRICT

    id: str | None = Field(default=None, min_length=1, pattern=r"^[^\s/]+$")
    description: str = ""
    task: str | None = None
    vars: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    checks: tuple[CheckSpec, ...] = Field(default=(), alias="assert")
    threshold: float | None = Field(default=None, ge=0, le=1)


class CasesSpec(BaseModel):
    """A cases file: its ``name``, ``defaults:``, ``cases:`` and the files more cases
    come from (``cases_from:``, JSON lines or CSV, relative to it), and the hive whose
    roles may judge beside the evaluated hive's (``judges:``)."""

    model_config = _STRICT

    name: str | None = None
    description: str = ""
    defaults: DefaultsSpec = Field(default_factory=DefaultsSpec)
    cases: tuple[CaseSpec, ...] = ()
    cases_from: tuple[str, ...] = ()
    judges: str | None = None

    @field_validator("cases_from", mode="before")
    @classmethod
    def _one_file(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value
