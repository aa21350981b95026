"""A schema's ``pattern`` as llama.cpp converts it into its grammar
(runtime/models/llama_patterns.py); what the real model makes of it, and that it
prints nothing, is in test_llama.py."""

from __future__ import annotations

import re

import pytest

from runtime.models.llama_patterns import served_pattern, served_schema


@pytest.mark.parametrize(
    ("given", "served"),
    [
        (r"^\d{4}-\d{2}$", "^[0-9]{4}-[0-9]{2}$"),
        (r"^\w+@\w+\.com$", r"^[a-zA-Z0-9_]+@[a-zA-Z0-9_]+\.com$"),
        (r"^\S+\s\D$", r"^[^ \t\n\r]+[ \t\n\r][^0-9]$"),
        (r"^[\d.]+/\/$", "^[0-9.]+//$"),
        (r"^[\s\w-]+$", r"^[ \t\n\ra-zA-Z0-9_-]+$"),
        (r"^(?:ab)+\.\x41\u00e9\\$", r"^(?:ab)+\.\x41\u00e9\\$"),  # as llama.cpp takes them
        ("^[A-Z]{3}$", "^[A-Z]{3}$"),
        ("^$", "^$"),
    ],
)
def test_a_pattern_is_written_as_llama_cpp_converts_it_matching_the_same_strings(
    given: str, served: str
) -> None:
    assert served_pattern(given) == served
    for text in ["2024-05", "ab_1@x2.com", "ab \t1", "1.2//", "a b-_", "abab.Aé\\", "ABC", ""]:
        assert bool(re.fullmatch(given, text)) == bool(re.fullmatch(served, text)), text


@pytest.mark.parametrize(
    "given",
    [
        "[a-z]+",  # not anchored
        "^a",
        "^a$|^b$",  # an anchor inside
        r"^(?=a)[a-z]+$",  # a lookahead
        r"^(?P<x>a)$",
        r"^(a)\1$",  # a backreference
        r"^a\$",  # the last dollar escaped: not an anchor
        r"^[\^a]$",
        r"^[\w-z]$",  # \w, '-', 'z': written out, a range
        r"^\bword\b$",
        r"^\x4$",
    ],
)
def test_a_pattern_llama_cpp_would_not_convert_has_no_form(given: str) -> None:
    assert served_pattern(given) is None


def test_a_schema_keeps_what_needs_no_change_and_leaves_out_what_has_no_form() -> None:
    plain = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}
    assert served_schema(plain, pytest.fail) is plain  # nothing copied
    schema = {
        "type": "object",
        "properties": {
            "year": {"type": "string", "pattern": r"^\d{4}$"},
            "word": {"type": "string", "pattern": r"^(?!x)\w+$"},
            "pattern": {"type": "string", "enum": ["^x"]},  # a property so named
            "list": {"type": "array", "items": {"anyOf": [{"pattern": r"^\s$"}]}},
        },
        "default": {"pattern": r"\d"},  # data, not a keyword
        "required": ["pattern"],
    }
    unserved: list[str] = []
    served = served_schema(schema, unserved.append)
    assert unserved == [r"^(?!x)\w+$"]
    assert served["properties"]["year"] == {"type": "string", "pattern": "^[0-9]{4}$"}
    assert served["properties"]["word"] == {"type": "string"}
    assert served["properties"]["pattern"] == schema["properties"]["pattern"]
    assert served["properties"]["list"]["items"]["anyOf"] == [{"pattern": r"^[ \t\n\r]$"}]
    assert (served["default"], served["required"]) == (schema["default"], ["pattern"])
    assert schema["properties"]["year"]["pattern"] == r"^\d{4}$"  # the given one unchanged
