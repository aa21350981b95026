"""docs/interactions.md says what the matrix tests: it is made from the matrix's own
tables, and a change to them that the page does not follow fails here."""

from __future__ import annotations

from tests.interactions.matrix import FEATURES, KNOWN, NOT_APPLICABLE, cells
from tests.interactions.render import COMMAND, PAGE, render


def test_the_page_is_made_from_the_matrix() -> None:
    written = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    assert written == render(), f"docs/interactions.md is out of date: run `{COMMAND}`"


def test_every_pair_is_a_cell_and_every_note_names_features_of_the_matrix() -> None:
    names = {f.name for f in FEATURES}
    assert len(names) == len(FEATURES)
    assert len(cells()) == len(FEATURES) * (len(FEATURES) + 1) // 2
    for pair, why in NOT_APPLICABLE.items():
        assert pair <= names, f"not applicable: {sorted(pair)} are not all features"
        assert len(pair) == 2, "a feature alone always applies"
        assert why.strip()
    for known in KNOWN:
        for a, b in known.cells:
            assert {a, b} - {"*"} <= names, f"{known.label}: unknown features in {(a, b)}"
        assert set(known.unless) <= names
        assert any(cell.known and known in cell.known for cell in cells()), (
            f"{known.label} ({known.invariant}) shows in no cell"
        )
