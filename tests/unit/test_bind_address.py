"""Addresses to listen on, as METRICS_BIND and --metrics-bind take them."""

from __future__ import annotations

import urllib.request

import pytest

from webhook.bind_address import parse_bind
from webhook.metrics_http import MetricsServer


@pytest.mark.parametrize(
    ("text", "address"),
    [("0.0.0.0:9102", ("0.0.0.0", 9102)), (":9102", ("0.0.0.0", 9102)), ("[::1]:0", ("::1", 0))],
)
def test_an_address_is_read(text: str, address: tuple[str, int]) -> None:
    assert parse_bind(text) == address


@pytest.mark.parametrize("text", ["9102", "host:port", "host:99999", "host:٣"])
def test_what_is_no_address_says_what_to_write(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not host:port, such as 0\.0\.0\.0:9102"):
        parse_bind(text)


def test_the_metrics_server_listens_on_ipv6_too() -> None:
    server = MetricsServer(lambda: b"counted 1\n", *parse_bind("[::1]:0"))
    server.start()
    try:
        with urllib.request.urlopen(f"http://[::1]:{server.port}/metrics", timeout=5) as answer:
            assert answer.read() == b"counted 1\n"
    finally:
        server.stop()
