"""The share each text handed on gets (honeycomb.run.handing.fit_texts): together within
the tokens given, a short text whole, the longer ones cut to equal shares, each cut
one keeping its start and ending with the note of how much was left out and where the
whole is."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from honeycomb.run.handing import fit_texts
from runtime import UserMessage
from workers.context import TOKENS_PER_MESSAGE, estimate_tokens

NOTE = re.compile(
    r"\n*\[cut here to fit the context of the model it is handed to: ([\d,]+) of ([\d,]+) "
    r"characters left out; the whole text is (.+)\]$"
)


def tokens(text: str) -> int:
    return estimate_tokens((UserMessage(content=text),)) - TOKENS_PER_MESSAGE


def test_a_short_text_is_whole_and_the_long_ones_share_the_rest() -> None:
    long_a, short, long_b = "ant " * 2000, "a wasp", "bee " * 3000
    fitted = fit_texts([long_a, short, long_b], 400, ["s1's", "s2's", "s3's"])

    assert fitted[1] == short
    assert sum(tokens(t) for t in fitted) <= 400
    for text, whole, where in ((fitted[0], long_a, "s1's"), (fitted[2], long_b, "s3's")):
        note = NOTE.search(text)
        assert note is not None
        assert note.group(3) == where
        kept = text[: note.start()]
        assert whole.startswith(kept)
        assert kept.endswith("ant" if whole is long_a else "bee")
        left, total = (int(n.replace(",", "")) for n in note.groups()[:2])
        assert (total, left) == (len(whole), len(whole) - len(kept))
    # equal shares: as much of each is kept, to a word
    assert abs(len(NOTE.split(fitted[0])[0]) - len(NOTE.split(fitted[2])[0])) <= 4


def test_with_no_room_each_is_its_note_alone() -> None:
    fitted = fit_texts(["ant " * 100, "bee"], 0, ["s1's", "s2's"])
    assert [NOTE.fullmatch(t) is not None for t in fitted] == [True, True]
    assert fitted[1].startswith("[cut here")
    assert "3 of 3 characters left out" in fitted[1]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(min_size=0, max_size=3000), min_size=1, max_size=6),
    st.integers(min_value=0, max_value=3000),
)
def test_texts_fit_their_tokens_whenever_their_notes_do(texts: list[str], room: int) -> None:
    where = [f"s{i}'s" for i in range(len(texts))]
    fitted = fit_texts(texts, room, where)

    if room >= 60 * len(texts):  # a share of each cut one holds its note (~40 tokens)
        assert sum(tokens(t) for t in fitted) <= room
    for text, shown in zip(texts, fitted, strict=True):
        if shown != text:
            note = NOTE.search(shown)
            assert note is not None
            assert text.startswith(shown[: note.start()])
    if sum(tokens(t) for t in texts) <= room:
        assert fitted == texts  # all fits: nothing is cut
