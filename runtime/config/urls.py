"""The URLs a person writes for an HTTP endpoint (a model's ``base_url``, an MCP
server's ``url``): whether one can be reached, and how an error quotes it, without
its password and keys."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from runtime.secrets import masked_with, url_secrets

__all__ = ["http_url_problem", "shown_url"]


def http_url_problem(url: str, field: str) -> str | None:
    """What is wrong with ``url``, given as ``field``, if no HTTP request can go to
    it: one without ``http://`` or ``https://`` (``localhost:11434/v1``), one with a
    line break or another control character in it (read with the end of a line of a
    Windows .env), or one no URL parser reads (a port past 65535, a host's ``[``
    never closed). None when one can."""
    shown = shown_url(url)
    if re.match(r"https?://[^/?#\s]", url.strip(), re.IGNORECASE):
        if not url.isprintable():
            return (
                f"{field} {shown!r} holds a line break or another control character "
                "(read with the end of its line?): remove it"
            )
        try:
            urlsplit(url.strip()).port  # noqa: B018 (read to be checked)
        except ValueError as exc:
            return f"{field} {shown!r} cannot be read as a URL ({exc})"
        return None
    scheme, sep, _ = url.partition("://")
    if sep and scheme.isascii() and scheme.isalnum():
        return f"{field} {shown!r} is not an http:// or https:// URL ({scheme}://)"
    meant = "http://" + shown.strip().lstrip("/")
    return f"{field} {shown!r} has no http:// or https:// (write {meant!r})"


def shown_url(url: str) -> str:
    """``url`` as an error quotes it: without the password of its userinfo or the keys
    of its query (:func:`~runtime.secrets.url_secrets`), as those of the URL it would
    be with ``http://`` where it has no scheme (``user:PASSWORD@host/v1``)."""
    whole = url if "://" in url else "http://" + url.strip().lstrip("/")
    return masked_with(url, dict.fromkeys(url_secrets(whole), "password"))
