"""The rows of a JSON lines or CSV file of cases (``cases_from:``), each at its line:
a row's keys (a CSV's columns) are the case's fields (:data:`ROW_FIELDS`) and its vars,
but for one that misspells a field (:func:`misspelt`)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime import ConfigError, did_you_mean

__all__ = ["ROW_FIELDS", "misspelt", "records"]

ROW_FIELDS = ("id", "task", "expected", "assert", "threshold", "description", "vars")
"""A row's keys that are the case's fields: its other keys are its vars."""


def misspelt(row: Mapping[str, Any], put_in: set[str]) -> list[tuple[str, str]]:
    """The keys of a row that misspell a field (``asserts``, a column ``Expected``)
    rather than name a var, each with what is wrong: close to a field, and a var no text
    of its case takes. Taken for a var, the checks or answer it holds would be dropped."""
    found = []
    for key in row:
        close = did_you_mean(key, ROW_FIELDS) if key not in ROW_FIELDS else ""
        if close and key not in put_in:
            said = (
                f"unknown field {key!r}{close}: the other keys of a case are its vars, and "
                f"no task or check of it takes {{{{{key}}}}}; its fields: {', '.join(ROW_FIELDS)}"
            )
            found.append((key, said))
    return found


def records(file: Path, text: str, errors: list[ConfigError]) -> list[tuple[int, dict[str, Any]]]:
    """The rows of ``text``, the JSON lines or CSV file ``file`` holds, each with its
    line; a line that is no row is told in ``errors``."""
    if file.suffix == ".csv":
        return _csv_records(file, text, errors)
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            errors.append(ConfigError(f"not JSON: {exc}", file=str(file), line=n))
            continue
        if not isinstance(row, dict):
            errors.append(
                ConfigError("each line is a JSON object (a case)", file=str(file), line=n)
            )
            continue
        rows.append((n, row))
    return rows


def _csv_records(
    file: Path, text: str, errors: list[ConfigError]
) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a CSV file, each at the line it starts on: a quoted value may hold
    line breaks (a task of several lines), which are the value's, and a row of more
    values than the header names columns is an error at its line. Its values are
    separated by commas, or by semicolons or tabs when its header has no comma."""
    header = text.partition("\n")[0]
    # A spreadsheet set to a language whose decimal mark is a comma separates by ';'.
    found = [d for d in ";\t" if d in header] if "," not in header else []
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=found[0] if found else ",")
    columns = reader.fieldnames or []
    rows: list[tuple[int, dict[str, Any]]] = []
    line = reader.line_num + 1
    for row in reader:
        extra = row.pop(None, None)  # DictReader's restkey: the values past the header
        if extra is not None:
            errors.append(
                ConfigError(
                    f"the row has {len(columns) + len(extra)} values, and the header names "
                    f"{len(columns)} column{'' if len(columns) == 1 else 's'} "
                    f"({', '.join(columns)}): quote a value that holds a comma",
                    file=str(file),
                    line=line,
                )
            )
        else:
            rows.append((line, dict(row)))
        line = reader.line_num + 1
    return rows
