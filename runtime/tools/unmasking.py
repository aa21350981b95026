"""A call's arguments as a run store keeps them, and the call again from them.

A store keeps every secret masked (``[password hidden]``), so a call that a run
resumes from its checkpoint (one that waited for approval, or that was cut off with
its turn) would run with the mask where the call had the secret. What a store keeps
tells the two kinds of mask apart: before a call's arguments (JSON) are kept, each mask
that is their text, not a secret masked (one an endpoint's answer was masked to as it
arrived, which the call ran with), has its ``[`` written as the escape ``\\u005b``
(:func:`kept_apart`: the same JSON values), so a bare mask in what is read back hid a
secret. :func:`revealed` puts back, in place of each bare mask, the secret this
process knows masked so; the mask of a secret it does not know (or of several it
knows) is refused, naming it: the call is not made with a mask in place of a secret,
and it is never given a secret its first life did not give it.
"""

from __future__ import annotations

import json
import re

from runtime.secrets import with_mask

__all__ = ["MASK", "HiddenSecret", "kept_apart", "revealed"]

MASK = re.compile(r'\[[^\[\]\n"\\]{1,100} hidden\]')
"""A secret's mask, as :func:`runtime.secrets.masked` writes it, in JSON text (no
quote or backslash in it: not the ``[`` of a list and what follows, up to a mask)."""

_LITERAL = "\\u005b"
"""A mask's ``[`` as a JSON escape: a mask that is a call's text, not a secret masked."""


class HiddenSecret(ValueError):
    """A call's arguments kept by a run store hold the mask of a secret that this
    process does not know, or that several secrets it knows are masked as.

    Attributes:
        mask: The mask (``[password hidden]``).
        known: How many secrets this process knows masked so (0, or 2 and more).
    """

    def __init__(self, mask: str, known: int) -> None:
        self.mask = mask
        self.known = known
        which = "knows no secret" if not known else f"knows {known} secrets"
        super().__init__(f"held a secret, kept as {mask}, and this process {which} masked so")


def kept_apart(arguments: str) -> str:
    """``arguments`` (a call's, as JSON, its secrets not masked yet) as a store is to
    keep them: each mask in them written with its ``[`` escaped, the same JSON values,
    so that once the store masks the secrets, a bare mask is one that hid a secret."""
    if "hidden]" not in arguments:
        return arguments
    return MASK.sub(lambda found: _LITERAL + found.group()[1:], arguments)


def revealed(arguments: str) -> str:
    """``arguments`` as a store kept them (:func:`kept_apart`, then masked), each bare
    mask the secret this process knows masked so, written into the JSON as JSON writes
    it: the call's own arguments again.

    Raises:
        HiddenSecret: naming the first mask of a secret this process does not know (or
            of several it knows).
    """
    if "hidden]" not in arguments:
        return arguments

    def secret(found: re.Match[str]) -> str:
        known = with_mask(found.group())
        if len(known) != 1:
            raise HiddenSecret(found.group(), len(known))
        return json.dumps(known[0], ensure_ascii=False)[1:-1]

    return MASK.sub(secret, arguments)
