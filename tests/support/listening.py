"""Where processes listen, seen from outside: a test that starts servers in processes
of their own (a Ray, a model server) checks that each listens on the loopback
interface only. Linux; ``psutil`` comes with Ray."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

import psutil


def listening(process: Any) -> list[str]:
    """The addresses ``process`` (a ``psutil.Process``) listens on; none once it ended."""
    try:
        found = process.net_connections(kind="inet")
    except psutil.NoSuchProcess:
        return []
    return [c.laddr.ip for c in found if c.status == psutil.CONN_LISTEN]


def loopback(address: str) -> bool:
    """Whether ``address`` is on the loopback interface (an IPv4-mapped one too)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def listeners(processes: Iterable[Any]) -> dict[str, list[str]]:
    """Each of ``processes`` that listens, named with its pid, and where it listens."""
    found = {f"{p.name()} ({p.pid})": listening(p) for p in processes}
    return {name: addresses for name, addresses in found.items() if addresses}


def wide(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """Those of ``found`` (:func:`listeners`) that listen beyond the loopback."""
    return {name: ips for name, ips in found.items() if not all(map(loopback, ips))}
