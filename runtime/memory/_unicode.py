"""The characters the memory's word index and its queries tell words by, written out
once for the index's version rather than read from the running Python, whose
:mod:`unicodedata` changes with its version (3.11 has Unicode 14, 3.12 Unicode 15, 3.13
Unicode 15.1): a memory file indexed under one Python is searched under another, and
both must cut the same text into the same words.

Generated, not written by hand (the marks from Python 3.13's :mod:`unicodedata`, the
separators from SQLite's word index, every code point put to it):
``tests/runtime/memory/test_memory_unicode.py`` checks them against the running
Python's and SQLite's, and shows what differs as a table writes it. Each is a regular
expression's character class without its brackets: a range ``first-last`` every three
characters (one character is ``c-c``).
"""

from __future__ import annotations

__all__ = ["DIACRITICS", "MARKS", "SEPARATORS", "spans"]

MARKS = (
    "\u0900-\u0903\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962-\u0963\u0981-\u0983"
    "\u09bc-\u09bc\u09be-\u09c4\u09c7-\u09c8\u09cb-\u09cd\u09d7-\u09d7\u09e2-\u09e3"
    "\u09fe-\u09fe\u0a01-\u0a03\u0a3c-\u0a3c\u0a3e-\u0a42\u0a47-\u0a48\u0a4b-\u0a4d"
    "\u0a51-\u0a51\u0a70-\u0a71\u0a75-\u0a75\u0a81-\u0a83\u0abc-\u0abc\u0abe-\u0ac5"
    "\u0ac7-\u0ac9\u0acb-\u0acd\u0ae2-\u0ae3\u0afa-\u0aff\u0b01-\u0b03\u0b3c-\u0b3c"
    "\u0b3e-\u0b44\u0b47-\u0b48\u0b4b-\u0b4d\u0b55-\u0b57\u0b62-\u0b63\u0b82-\u0b82"
    "\u0bbe-\u0bc2\u0bc6-\u0bc8\u0bca-\u0bcd\u0bd7-\u0bd7\u0c00-\u0c04\u0c3c-\u0c3c"
    "\u0c3e-\u0c44\u0c46-\u0c48\u0c4a-\u0c4d\u0c55-\u0c56\u0c62-\u0c63\u0c81-\u0c83"
    "\u0cbc-\u0cbc\u0cbe-\u0cc4\u0cc6-\u0cc8\u0cca-\u0ccd\u0cd5-\u0cd6\u0ce2-\u0ce3"
    "\u0cf3-\u0cf3\u0d00-\u0d03\u0d3b-\u0d3c\u0d3e-\u0d44\u0d46-\u0d48\u0d4a-\u0d4d"
    "\u0d57-\u0d57\u0d62-\u0d63\u0d81-\u0d83\u0dca-\u0dca\u0dcf-\u0dd4\u0dd6-\u0dd6"
    "\u0dd8-\u0ddf\u0df2-\u0df3\u0f18-\u0f19\u0f35-\u0f35\u0f37-\u0f37\u0f39-\u0f39"
    "\u0f3e-\u0f3f\u0f71-\u0f84\u0f86-\u0f87\u0f8d-\u0f97\u0f99-\u0fbc\u0fc6-\u0fc6"
    "\u1712-\u1715\u1732-\u1734\u1752-\u1753\u1772-\u1773\u1920-\u192b\u1930-\u193b"
    "\u1b80-\u1b82\u1ba1-\u1bad\u1cd0-\u1cd2\u1cd4-\u1ce8\u1ced-\u1ced\u1cf4-\u1cf4"
    "\u1cf7-\u1cf9\ua802-\ua802\ua806-\ua806\ua80b-\ua80b\ua823-\ua827\ua82c-\ua82c"
    "\ua880-\ua881\ua8b4-\ua8c5\ua8e0-\ua8f1\ua8ff-\ua8ff\ua926-\ua92d\uaaeb-\uaaef"
    "\uaaf5-\uaaf6\uabe3-\uabea\uabec-\uabed\U00011000-\U00011002\U00011038-\U00011046"
    "\U00011070-\U00011070\U00011073-\U00011074\U0001107f-\U00011082"
    "\U000110b0-\U000110ba\U000110c2-\U000110c2\U00011100-\U00011102"
    "\U00011127-\U00011134\U00011145-\U00011146\U00011173-\U00011173"
    "\U00011180-\U00011182\U000111b3-\U000111c0\U000111c9-\U000111cc"
    "\U000111ce-\U000111cf\U0001122c-\U00011237\U0001123e-\U0001123e"
    "\U00011241-\U00011241\U000112df-\U000112ea\U00011300-\U00011303"
    "\U0001133b-\U0001133c\U0001133e-\U00011344\U00011347-\U00011348"
    "\U0001134b-\U0001134d\U00011357-\U00011357\U00011362-\U00011363"
    "\U00011366-\U0001136c\U00011370-\U00011374\U00011435-\U00011446"
    "\U0001145e-\U0001145e\U000114b0-\U000114c3\U000115af-\U000115b5"
    "\U000115b8-\U000115c0\U000115dc-\U000115dd\U00011630-\U00011640"
    "\U000116ab-\U000116b7\U0001171d-\U0001172b\U0001182c-\U0001183a"
    "\U00011930-\U00011935\U00011937-\U00011938\U0001193b-\U0001193e"
    "\U00011940-\U00011940\U00011942-\U00011943\U000119d1-\U000119d7"
    "\U000119da-\U000119e0\U000119e4-\U000119e4\U00011a01-\U00011a0a"
    "\U00011a33-\U00011a39\U00011a3b-\U00011a3e\U00011a47-\U00011a47"
    "\U00011a51-\U00011a5b\U00011a8a-\U00011a99\U00011c2f-\U00011c36"
    "\U00011c38-\U00011c3f\U00011c92-\U00011ca7\U00011ca9-\U00011cb6"
    "\U00011d31-\U00011d36\U00011d3a-\U00011d3a\U00011d3c-\U00011d3d"
    "\U00011d3f-\U00011d45\U00011d47-\U00011d47\U00011d8a-\U00011d8e"
    "\U00011d90-\U00011d91\U00011d93-\U00011d97\U00011ef3-\U00011ef6"
    "\U00011f00-\U00011f01\U00011f03-\U00011f03\U00011f34-\U00011f3a"
    "\U00011f3e-\U00011f42"
)
"""The marks (Unicode's categories ``M*``: vowel signs, viramas ...) of the scripts of
India and their kin (``_MARKED_BLOCKS`` of :mod:`runtime.memory.store`), as Unicode 15.1 has
them (Python 3.13's :mod:`unicodedata`). Python 3.11 does not know some of them
(``\u0cf3`` of Kannada, Kawi's): they are kept in their words all the same."""
SEPARATORS = (
    "\u0080-\u00a9\u00ab-\u00b1\u00b4-\u00b4\u00b6-\u00b8\u00bb-\u00bb\u00bf-\u00bf"
    "\u00d7-\u00d7\u00f7-\u00f7\u02c2-\u02c5\u02d2-\u02df\u02e5-\u02eb\u02ed-\u02ed"
    "\u02ef-\u036f\u0375-\u0375\u037e-\u037e\u0384-\u0385\u0387-\u0387\u03f6-\u03f6"
    "\u0482-\u0489\u055a-\u055f\u0589-\u058a\u058f-\u058f\u0591-\u05c7\u05f3-\u05f4"
    "\u0600-\u0604\u0606-\u061b\u061e-\u061f\u064b-\u065f\u066a-\u066d\u0670-\u0670"
    "\u06d4-\u06d4\u06d6-\u06e4\u06e7-\u06ed\u06fd-\u06fe\u0700-\u070d\u070f-\u070f"
    "\u0711-\u0711\u0730-\u074a\u07a6-\u07b0\u07eb-\u07f3\u07f6-\u07f9\u0816-\u0819"
    "\u081b-\u0823\u0825-\u0827\u0829-\u082d\u0830-\u083e\u0859-\u085b\u085e-\u085e"
    "\u08e4-\u08fe\u0900-\u0903\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962-\u0965"
    "\u0970-\u0970\u0981-\u0983\u09bc-\u09bc\u09be-\u09c4\u09c7-\u09c8\u09cb-\u09cd"
    "\u09d7-\u09d7\u09e2-\u09e3\u09f2-\u09f3\u09fa-\u09fb\u0a01-\u0a03\u0a3c-\u0a3c"
    "\u0a3e-\u0a42\u0a47-\u0a48\u0a4b-\u0a4d\u0a51-\u0a51\u0a70-\u0a71\u0a75-\u0a75"
    "\u0a81-\u0a83\u0abc-\u0abc\u0abe-\u0ac5\u0ac7-\u0ac9\u0acb-\u0acd\u0ae2-\u0ae3"
    "\u0af0-\u0af1\u0b01-\u0b03\u0b3c-\u0b3c\u0b3e-\u0b44\u0b47-\u0b48\u0b4b-\u0b4d"
    "\u0b56-\u0b57\u0b62-\u0b63\u0b70-\u0b70\u0b82-\u0b82\u0bbe-\u0bc2\u0bc6-\u0bc8"
    "\u0bca-\u0bcd\u0bd7-\u0bd7\u0bf3-\u0bfa\u0c01-\u0c03\u0c3e-\u0c44\u0c46-\u0c48"
    "\u0c4a-\u0c4d\u0c55-\u0c56\u0c62-\u0c63\u0c7f-\u0c7f\u0c82-\u0c83\u0cbc-\u0cbc"
    "\u0cbe-\u0cc4\u0cc6-\u0cc8\u0cca-\u0ccd\u0cd5-\u0cd6\u0ce2-\u0ce3\u0d02-\u0d03"
    "\u0d3e-\u0d44\u0d46-\u0d48\u0d4a-\u0d4d\u0d57-\u0d57\u0d62-\u0d63\u0d79-\u0d79"
    "\u0d82-\u0d83\u0dca-\u0dca\u0dcf-\u0dd4\u0dd6-\u0dd6\u0dd8-\u0ddf\u0df2-\u0df4"
    "\u0e31-\u0e31\u0e34-\u0e3a\u0e3f-\u0e3f\u0e47-\u0e4f\u0e5a-\u0e5b\u0eb1-\u0eb1"
    "\u0eb4-\u0eb9\u0ebb-\u0ebc\u0ec8-\u0ecd\u0f01-\u0f1f\u0f34-\u0f3f\u0f71-\u0f87"
    "\u0f8d-\u0f97\u0f99-\u0fbc\u0fbe-\u0fcc\u0fce-\u0fda\u102b-\u103e\u104a-\u104f"
    "\u1056-\u1059\u105e-\u1060\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d"
    "\u108f-\u108f\u109a-\u109f\u10fb-\u10fb\u135d-\u1368\u1390-\u1399\u1400-\u1400"
    "\u166d-\u166e\u1680-\u1680\u169b-\u169c\u16eb-\u16ed\u1712-\u1714\u1732-\u1736"
    "\u1752-\u1753\u1772-\u1773\u17b4-\u17d6\u17d8-\u17db\u17dd-\u17dd\u1800-\u180e"
    "\u18a9-\u18a9\u1920-\u192b\u1930-\u193b\u1940-\u1940\u1944-\u1945\u19b0-\u19c0"
    "\u19c8-\u19c9\u19de-\u19ff\u1a17-\u1a1b\u1a1e-\u1a1f\u1a55-\u1a5e\u1a60-\u1a7c"
    "\u1a7f-\u1a7f\u1aa0-\u1aa6\u1aa8-\u1aad\u1b00-\u1b04\u1b34-\u1b44\u1b5a-\u1b7c"
    "\u1b80-\u1b82\u1ba1-\u1bad\u1be6-\u1bf3\u1bfc-\u1bff\u1c24-\u1c37\u1c3b-\u1c3f"
    "\u1c7e-\u1c7f\u1cc0-\u1cc7\u1cd0-\u1ce8\u1ced-\u1ced\u1cf2-\u1cf4\u1dc0-\u1de6"
    "\u1dfc-\u1dff\u1fbd-\u1fbd\u1fbf-\u1fc1\u1fcd-\u1fcf\u1fdd-\u1fdf\u1fed-\u1fef"
    "\u1ffd-\u1ffe\u2000-\u2064\u206a-\u206f\u207a-\u207e\u208a-\u208e\u20a0-\u20b9"
    "\u20d0-\u20f0\u2100-\u2101\u2103-\u2106\u2108-\u2109\u2114-\u2114\u2116-\u2118"
    "\u211e-\u2123\u2125-\u2125\u2127-\u2127\u2129-\u2129\u212e-\u212e\u213a-\u213b"
    "\u2140-\u2144\u214a-\u214d\u214f-\u214f\u2190-\u23f3\u2400-\u2426\u2440-\u244a"
    "\u249c-\u24e9\u2500-\u26ff\u2701-\u2775\u2794-\u2b4c\u2b50-\u2b59\u2ce5-\u2cea"
    "\u2cef-\u2cf1\u2cf9-\u2cfc\u2cfe-\u2cff\u2d70-\u2d70\u2d7f-\u2d7f\u2de0-\u2e2e"
    "\u2e30-\u2e3b\u2e80-\u2e99\u2e9b-\u2ef3\u2f00-\u2fd5\u2ff0-\u2ffb\u3000-\u3004"
    "\u3008-\u3020\u302a-\u3030\u3036-\u3037\u303d-\u303f\u3099-\u309c\u30a0-\u30a0"
    "\u30fb-\u30fb\u3190-\u3191\u3196-\u319f\u31c0-\u31e3\u3200-\u321e\u322a-\u3247"
    "\u3250-\u3250\u3260-\u327f\u328a-\u32b0\u32c0-\u32fe\u3300-\u33ff\u4dc0-\u4dff"
    "\ua490-\ua4c6\ua4fe-\ua4ff\ua60d-\ua60f\ua66f-\ua67e\ua69f-\ua69f\ua6f0-\ua6f7"
    "\ua700-\ua716\ua720-\ua721\ua789-\ua78a\ua802-\ua802\ua806-\ua806\ua80b-\ua80b"
    "\ua823-\ua82b\ua836-\ua839\ua874-\ua877\ua880-\ua881\ua8b4-\ua8c4\ua8ce-\ua8cf"
    "\ua8e0-\ua8f1\ua8f8-\ua8fa\ua926-\ua92f\ua947-\ua953\ua95f-\ua95f\ua980-\ua983"
    "\ua9b3-\ua9cd\ua9de-\ua9df\uaa29-\uaa36\uaa43-\uaa43\uaa4c-\uaa4d\uaa5c-\uaa5f"
    "\uaa77-\uaa79\uaa7b-\uaa7b\uaab0-\uaab0\uaab2-\uaab4\uaab7-\uaab8\uaabe-\uaabf"
    "\uaac1-\uaac1\uaade-\uaadf\uaaeb-\uaaf1\uaaf5-\uaaf6\uabe3-\uabed\ufb1e-\ufb1e"
    "\ufb29-\ufb29\ufbb2-\ufbc1\ufd3e-\ufd3f\ufdfc-\ufdfd\ufe00-\ufe19\ufe20-\ufe26"
    "\ufe30-\ufe52\ufe54-\ufe66\ufe68-\ufe6b\ufeff-\ufeff\uff01-\uff0f\uff1a-\uff20"
    "\uff3b-\uff40\uff5b-\uff65\uffe0-\uffe6\uffe8-\uffee\ufff9-\uffff"
    "\U00010100-\U00010102\U00010137-\U0001013f\U00010179-\U00010189"
    "\U00010190-\U0001019b\U000101d0-\U000101fd\U0001039f-\U0001039f"
    "\U000103d0-\U000103d0\U00010857-\U00010857\U0001091f-\U0001091f"
    "\U0001093f-\U0001093f\U00010a01-\U00010a03\U00010a05-\U00010a06"
    "\U00010a0c-\U00010a0f\U00010a38-\U00010a3a\U00010a3f-\U00010a3f"
    "\U00010a50-\U00010a58\U00010a7f-\U00010a7f\U00010b39-\U00010b3f"
    "\U00011000-\U00011002\U00011038-\U0001104d\U00011080-\U00011082"
    "\U000110b0-\U000110c1\U00011100-\U00011102\U00011127-\U00011134"
    "\U00011140-\U00011143\U00011180-\U00011182\U000111b3-\U000111c0"
    "\U000111c5-\U000111c8\U000116ab-\U000116b7\U00012470-\U00012473"
    "\U00016f51-\U00016f7e\U00016f8f-\U00016f92\U0001d000-\U0001d0f5"
    "\U0001d100-\U0001d126\U0001d129-\U0001d1dd\U0001d200-\U0001d245"
    "\U0001d300-\U0001d356\U0001d6c1-\U0001d6c1\U0001d6db-\U0001d6db"
    "\U0001d6fb-\U0001d6fb\U0001d715-\U0001d715\U0001d735-\U0001d735"
    "\U0001d74f-\U0001d74f\U0001d76f-\U0001d76f\U0001d789-\U0001d789"
    "\U0001d7a9-\U0001d7a9\U0001d7c3-\U0001d7c3\U0001eef0-\U0001eef1"
    "\U0001f000-\U0001f02b\U0001f030-\U0001f093\U0001f0a0-\U0001f0ae"
    "\U0001f0b1-\U0001f0be\U0001f0c1-\U0001f0cf\U0001f0d1-\U0001f0df"
    "\U0001f110-\U0001f12e\U0001f130-\U0001f16b\U0001f170-\U0001f19a"
    "\U0001f1e6-\U0001f202\U0001f210-\U0001f23a\U0001f240-\U0001f248"
    "\U0001f250-\U0001f251\U0001f300-\U0001f320\U0001f330-\U0001f335"
    "\U0001f337-\U0001f37c\U0001f380-\U0001f393\U0001f3a0-\U0001f3c4"
    "\U0001f3c6-\U0001f3ca\U0001f3e0-\U0001f3f0\U0001f400-\U0001f43e"
    "\U0001f440-\U0001f440\U0001f442-\U0001f4f7\U0001f4f9-\U0001f4fc"
    "\U0001f500-\U0001f53d\U0001f540-\U0001f543\U0001f550-\U0001f567"
    "\U0001f5fb-\U0001f640\U0001f645-\U0001f64f\U0001f680-\U0001f6c5"
    "\U0001f700-\U0001f773\U000e0001-\U000e0001\U000e0020-\U000e007f"
    "\U000e0100-\U000e01ef"
)
"""The characters past ASCII that SQLite's word index (its ``unicode61`` tokenizer,
whose tables are Unicode 6.1's, with ``remove_diacritics``) takes for separators unless
its ``tokenchars`` keep them. Every character its tables do not know is part of a word
to it, a letter no Python knew then as much as a mark or a character of none yet: a
query tells its words by these, as the index does, not by what the running Python
takes for a letter."""

DIACRITICS = (
    "\u0300-\u0304\u0306-\u030c\u030f-\u030f\u0311-\u0311\u031b-\u031b\u0323-\u0328"
    "\u032d-\u032e\u0330-\u0331"
)
"""The accents of :data:`SEPARATORS` the index takes out of a word (``q\\u0301rst`` is
``qrst``) rather than cutting it there; before a word, as after one, they are
separators."""


def spans(table: str) -> tuple[tuple[int, int], ...]:
    """The ranges of code points of ``table`` (one of the tables above), first and last."""
    return tuple((ord(table[at]), ord(table[at + 2])) for at in range(0, len(table), 3))
