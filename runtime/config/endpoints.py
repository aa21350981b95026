"""What a person writes for an HTTP endpoint: its URL (a model's ``base_url``, an MCP
server's ``url``), whether one can be reached and how an error quotes it, without its
password and keys; and its headers' names and values, whether an HTTP client can send
them."""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote, urlsplit

from runtime.secrets import masked_with, url_secrets

__all__ = [
    "endpoint_secrets",
    "header_name_problem",
    "header_value_problem",
    "http_url_problem",
    "shown_url",
    "unsendable",
]


def http_url_problem(url: str, field: str) -> str | None:
    """What is wrong with ``url``, given as ``field``, if no HTTP request can go to
    it: one without ``http://`` or ``https://`` (``localhost:11434/v1``), one with a
    line break or another control character in it (read with the end of a line of a
    Windows .env), one with no host (``http:///v1``, ``https://:443/v1``), or one no URL
    parser reads (a port past 65535, a host's ``[`` never closed). None when one can."""
    shown = shown_url(url)
    if re.match(r"https?://[^/?#\s]", url.strip(), re.IGNORECASE):
        if not url.isprintable():
            return (
                f"{field} {shown!r} holds a line break or another control character "
                "(read with the end of its line?): remove it"
            )
        try:
            parts = urlsplit(url.strip())
            parts.port  # noqa: B018 (read to be checked)
        except ValueError as exc:
            return f"{field} {shown!r} cannot be read as a URL ({exc})"
        return None if parts.hostname else _no_host(field, shown)
    scheme, sep, _ = url.partition("://")
    if re.fullmatch(r"\s*https?", scheme, re.IGNORECASE):
        return _no_host(field, shown)
    if sep and scheme.isascii() and scheme.isalnum():
        return f"{field} {shown!r} is not an http:// or https:// URL ({scheme}://)"
    meant = "http://" + shown.strip().lstrip("/")
    return f"{field} {shown!r} has no http:// or https:// (write {meant!r})"


def _no_host(field: str, shown: str) -> str:
    """What an http:// or https:// URL with no host after its scheme is told."""
    return f"{field} {shown!r} names no host after its scheme (as http://localhost:8000/...)"


def shown_url(url: str) -> str:
    """``url`` as an error quotes it: without its :func:`endpoint_secrets`, as those of
    the URL it would be with ``http://`` in place of its scheme, or where it has none
    (``user:PASSWORD@host/v1``, ``ws://TOKEN@host/v1``)."""
    _, sep, rest = url.partition("://")
    whole = "http://" + (rest if sep else url.strip().lstrip("/"))
    return masked_with(url, dict.fromkeys(endpoint_secrets(whole), "password"))


def endpoint_secrets(urls: str) -> list[str]:
    """The secrets of the URLs in ``urls``: the password of their userinfo and the keys
    of their query (:func:`~runtime.secrets.url_secrets`), and, of an ``http://`` or
    ``https://`` one, a userinfo with no password (a token written as its user,
    ``https://TOKEN@host/v1``), which an HTTP client sends as the request's credentials
    as it sends a password (``Basic``, the base64 of ``TOKEN:``). That of another
    scheme's stays a name (a run store's ``postgresql://user@host/db``).

    The one rule for every URL a person writes: a model's ``base_url``, an MCP
    server's ``url`` and ``args``, a hive's values as its errors quote them, the
    command that continues a run."""
    found = url_secrets(urls)
    for match in _HTTP_AUTHORITY.finditer(urls):
        users, at, _ = match.group("authority").rpartition("@")
        if at and users and ":" not in users:  # a user alone: ``TOKEN`` of ``https://TOKEN@host``
            plain = f"{unquote(users)}:".encode()
            found += [users, unquote(users), base64.b64encode(plain).decode("ascii")]
    return list(dict.fromkeys(found))


_HTTP_AUTHORITY = re.compile(r"(?<![A-Za-z0-9+.-])https?://(?P<authority>[^\s/?#]*)", re.IGNORECASE)
"""An ``http://`` or ``https://`` URL's authority (``user:password@host:port``), wherever
it begins (``--url=https://...``)."""


def unsendable(value: str) -> str | None:
    """Why an HTTP client cannot send ``value`` in a header (an API key in its
    ``Authorization``, a header a person gives), in words that show none of it, so that
    every request would fail as if its server were away; None when it can. HTTP refuses
    a space or a line break at an end (a token read with the end of a line of a Windows
    .env) and a control character; httpx sends a header in ASCII alone (a key pasted
    with a typographic character in it: ``…``, ``’``)."""
    if value != value.strip():
        return "begins or ends with a space or a line break (read with the end of its line?)"
    if not value.isascii():
        return "holds a character that is not ASCII, which no HTTP header carries (pasted?)"
    if not value.replace("\t", " ").isprintable():
        return "holds a control character"
    return None


def header_value_problem(value: str) -> str | None:
    """What keeps ``value`` from being sent as a header's value
    (:func:`unsendable`), without showing it (a header may hold a secret);
    None when it can be sent."""
    why = unsendable(value)
    return None if why is None else f"a header's value {why}: remove it"


def header_name_problem(name: str) -> str | None:
    """What keeps ``name`` from being sent as a header's name, which HTTP holds to
    letters, digits and ``!#$%&'*+-.^_`|~`` (a colon or a space written with it,
    ``Authorization:``; a character that is not ASCII), showing it up to that
    character alone (a token written after it is not shown); None when it can be sent."""
    if not name:
        return "a header's name is empty"
    begun = _TOKEN.match(name)
    at = begun.end() if begun else 0
    if at == len(name):
        return None
    return (
        f"a header's name holds {name[at]!r} after {name[:at]!r}: a name is letters, digits "
        "and !#$%&'*+-.^_`|~ alone"
    )


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP token: what a header's name is (RFC 9110)."""
