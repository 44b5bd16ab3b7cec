"""`host:port` as the settings and the command line take an address to listen on."""

from __future__ import annotations


def parse_bind(bind: str) -> tuple[str, int]:
    """`host:port` (`[::]:9102` for IPv6; an empty host is every IPv4 address) as a socket
    address; ValueError saying what to write when it is none."""
    host, colon, port = bind.rpartition(":")
    if not colon or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{bind!r} is not host:port, such as 0.0.0.0:9102")
    return host.strip("[]") or "0.0.0.0", int(port)
