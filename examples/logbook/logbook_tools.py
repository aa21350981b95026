"""The logbook example's tool: an expedition's logbook, read one page at a time.

Every page holds one reading (a number, a place, a time) amid two kilobytes of the
day's narrative; the reader must keep the readings of page 1 in mind while it reads
page 24, which is what compaction's rolling summary is for.
"""

from __future__ import annotations

import json

from honeycomb import tool

PAGES = 24
_PLACES = ("North Col", "Blue Lake", "Ridge Camp", "Glacier Foot", "Stone Hut", "Pass Gate")
_NARRATIVE = (
    "The wind came down off the ridge before dawn and the tents shook until the light "
    "was up. We melted snow for tea, checked the ropes and the sledges, and talked about "
    "the route ahead while the porters sang the old songs of the valley. "
)


def reading(page: int) -> str:
    """The reading recorded on ``page`` (what a summary must keep)."""
    place = _PLACES[page % len(_PLACES)]
    return f"Reading {page}: {place}, {page * 37 % 900 + 100} m, {-page * 3 % 25 - 20} C"


@tool
def read_page(page: int = 1) -> str:
    """Read one page of the expedition logbook (pages 1 to 24, in order)."""
    if not 1 <= page <= PAGES:
        raise ValueError(f"the logbook has pages 1 to {PAGES}, not {page}")
    text = reading(page) + "\n" + _NARRATIVE * 6
    following = page + 1 if page < PAGES else None
    return json.dumps({"page": page, "of": PAGES, "next_page": following, "text": text})
