"""The names a serving certificate covers."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from cryptography import x509


def dev_hosts() -> list[str]:
    """Names a locally running webhook is reached by."""
    return ["localhost", "127.0.0.1", "::1"]


def service_hosts(service: str, namespace: str) -> list[str]:
    """DNS names the API server may use to reach a webhook Service."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def parse_host(host: str) -> x509.GeneralName:
    """A SAN entry: an IP address if `host` is one, else a DNS name. Raises ValueError."""
    if not host or host != host.strip() or any(ch.isspace() for ch in host):
        raise ValueError(f"invalid host name: {host!r}")
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def unique(hosts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(hosts))


def checked_hosts(hosts: Iterable[str]) -> list[str]:
    """`hosts` without repeats, each one usable as a SAN; raises ValueError otherwise."""
    hosts = unique(hosts)
    if not hosts:
        raise ValueError("at least one host is required")
    for host in hosts:
        parse_host(host)
    return hosts


def san_key(name: x509.GeneralName) -> str:
    """Comparable form of a SAN entry: normalised IP text or lower-cased DNS name."""
    if isinstance(name, x509.IPAddress):
        return str(name.value)
    return str(name.value).lower()
