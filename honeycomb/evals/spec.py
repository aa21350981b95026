"""What a cases file (``evals.yaml``) may say, field by field: the pydantic models it
is checked against, so that each mistake is told at its file, line and field, as a
hive's are (docs/evals.md).

Every check is a mapping with one kind key (``contains: Lisbon``) and, beside it,
an optional ``weight`` and ``threshold`` (and, for a check that may take long, a
``timeout``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runtime import did_you_mean

__all__ = [
    "KINDS",
    "STATUSES",
    "TIMED",
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
    "valid_part",
]

_STRICT = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Texts(BaseModel):
    """Texts to look for: ``all`` of them, or ``any`` of them. Written as one text, or
    a list (all of it), or ``{any: [...]}`` / ``{all: [...]}``."""

    model_config = _STRICT
    # What a mistake's message says it takes besides its mapping (``contains: 240``,
    # a number, is one: read as a number, 0240 would be 160).
    shorthand: ClassVar[str] = "a text (a number in quotes: '240'), or a list of texts"

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
        if "" in self.all or "" in self.any:  # found in any answer: it would check nothing
            raise ValueError("an empty text is in every answer: write what to look for")
        return self


class Count(BaseModel):
    """How many times: ``at_least`` and/or ``at_most`` (a bare number: exactly)."""

    model_config = _STRICT
    shorthand: ClassVar[str] = "a number (exactly so many)"

    at_least: int | None = Field(default=None, ge=0)
    at_most: int | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _exactly(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            if data < 0:  # told once, not for at_least and at_most it stands for
                raise ValueError(f"a count is 0 or more, not {data}")
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
    shorthand: ClassVar[str] = "a number (at most so much)"

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
        if self.at_least is not None and self.at_most is not None and self.at_least > self.at_most:
            # No run could pass it: a bound mistyped, told as a count's is.
            raise ValueError(f"at_least ({self.at_least:g}) is above at_most ({self.at_most:g})")
        return self


class Latency(Amount):
    """A bound on a run's time in seconds: its wall time, or its critical path
    (``of: critical_path``: what no schedule could beat)."""

    shorthand: ClassVar[str] = "a number of seconds (at most so long)"

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

    @field_validator("json_schema")
    @classmethod
    def _a_schema(cls, schema: Any) -> Any:
        """A schema that is not one would fail every case that checks it, as it runs:
        it is a mistake of the file."""
        if not isinstance(schema, dict):
            return schema
        try:
            import jsonschema
        except ImportError as exc:
            raise ValueError(
                "checking against a schema needs jsonschema: pip install 'honeycomb-agents[evals]'"
            ) from exc
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "the schema"
            raise ValueError(f"not a JSON schema: {where}: {exc.message}") from exc
        return schema


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


_EXAMPLES = {
    "contains": "contains: Lisbon",
    "icontains": "icontains: lisbon",
    "not_contains": "not_contains: sorry",
    "regex": "regex: '\\d+ euros'",
    "json": "json: true",
    "python": "python: checks:similar",
    "judge": "judge: {role: critic, rubric: ...}",
    "status": "status: ok",
    "tool_called": "tool_called: get_weather",
    "side_effects": "side_effects: 1",
    "cost": "cost: 0.05",
    "latency": "latency: 10",
    "tokens": "tokens: 20000",
    "model_calls": "model_calls: 30",
}
"""A check of each kind, as an error shows how one is written."""


TIMED = ("python", "judge")
"""The kinds of check that may take long, and take a ``timeout:`` (seconds): a
``python`` check has one by default (:data:`~honeycomb.evals.checks.CHECK_TIMEOUT_S`),
a ``judge`` is bounded by its role's model timeout unless it sets one."""


STATUSES = ("ok", "partial", "failed", "over_budget", "waiting", "error")
"""How a case's run may end, as a ``status`` check names it (``error``: it raised
before it had a result)."""


def _a_status(value: str) -> str:
    if value not in STATUSES:
        raise ValueError(
            f"{value!r} is no status a run ends with{did_you_mean(value, STATUSES)}; the "
            f"statuses: {', '.join(STATUSES)}"
        )
    return value


Status = Annotated[str, AfterValidator(_a_status)]
"""One of :data:`STATUSES`: a misspelt one would fail every case, so it is refused."""


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
    python: str | None = None
    judge: JudgeSpec | None = None
    status: tuple[Status, ...] | None = None
    tool_called: ToolCalled | None = None
    side_effects: Count | None = None
    cost: Amount | None = None
    latency: Latency | None = None
    tokens: Amount | None = None
    model_calls: Amount | None = None
    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    threshold: float = Field(default=1.0, ge=0, le=1)
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)

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
        (kind,) = kinds
        if data[kind] is None and kind != "equals":  # `- contains:`, its value left out
            raise ValueError(f"{kind!r} has no value: write what it checks ({_EXAMPLES[kind]})")
        if isinstance(data.get("status"), str):
            data = {**data, "status": [data["status"]]}
        return data

    @field_validator("status")
    @classmethod
    def _some_status(cls, wanted: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if wanted == ():
            raise ValueError(f"name one status or more: {', '.join(STATUSES)}")
        return wanted

    @field_validator("timeout")
    @classmethod
    def _timed(cls, timeout: float | None, info: ValidationInfo) -> float | None:
        """Only a check that may take long has a time limit (a kind that did not
        validate, absent from ``info.data``, is told on its own)."""
        if timeout is not None and all(info.data.get(k, k) is None for k in TIMED):
            raise ValueError(
                f"a time limit is for {' and '.join(TIMED)} checks: the other kinds return at once"
            )
        return timeout

    @field_validator("python")
    @classmethod
    def _a_function(cls, path: str | None) -> str | None:
        if path is not None and not _FUNCTION.fullmatch(path):
            raise ValueError(
                f"{path!r} names no function: write module:function (python: checks:similar)"
            )
        return path

    @field_validator("regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern == "":  # found in any answer: it would check nothing
            raise ValueError("an empty pattern matches every answer: write what to look for")
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


_FUNCTION = re.compile(r"[\w.]+:[\w.]+")
"""What a ``python`` check names: a function of a module (``checks:similar``)."""


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
    come from (``cases_from:``, JSON lines or CSV, relative to it), the hive whose
    roles may judge beside the evaluated hive's (``judges:``), and whether its cases
    share one long-term memory (``memory: shared``) or each run has its own."""

    model_config = _STRICT

    name: str | None = None
    description: str = ""
    defaults: DefaultsSpec = Field(default_factory=DefaultsSpec)
    cases: tuple[CaseSpec, ...] = ()
    cases_from: tuple[str, ...] = ()
    judges: str | None = None
    memory: Literal["own", "shared"] = "own"

    @field_validator("cases_from", mode="before")
    @classmethod
    def _one_file(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


_NEEDED = ("id", "task", "vars")
"""What the rest of a case is checked by: its vars fill its checks, its id tells it
from the others."""


def valid_part(data: Any) -> tuple[CaseSpec, tuple[int, ...]] | None:
    """What is valid of a case that is not: it without the fields and checks that are
    not, and the place of each check it keeps, to be checked further (every mistake
    told at once). None when its id, task or vars are not valid, since its checks
    would be told of vars it may have, or when it is no mapping."""
    if not isinstance(data, Mapping):
        return None
    try:
        case = CaseSpec.model_validate(data)
        return case, tuple(range(len(case.checks)))
    except ValidationError as exc:
        places = [error["loc"] for error in exc.errors()]
    if any(not loc or loc[0] in _NEEDED for loc in places):
        return None
    checks = {loc[1] for loc in places if loc[0] == "assert" and len(loc) > 1}
    fields = {loc[0] for loc in places if loc[0] != "assert" or len(loc) == 1}
    kept = {k: v for k, v in data.items() if k not in fields}
    listed = kept.get("assert")
    at: tuple[int, ...] = ()
    if isinstance(listed, list):
        at = tuple(n for n in range(len(listed)) if n not in checks)
        kept["assert"] = [listed[n] for n in at]
    try:
        return CaseSpec.model_validate(kept), at
    except ValidationError:
        return None
