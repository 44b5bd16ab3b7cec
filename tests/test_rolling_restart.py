"""SIGTERM under load, as a rolling update sends it: every review the server read is answered,
new connections are refused at once (not left to time out), and the server is gone well within
its graceful timeout, with or without a silent connection open."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.kept_alive import review_body
from tests.support.server import REPO_ROOT, WebhookServer

CLIENTS = 3
PER_CLIENT_RATE = 100  # reviews/s: 300/s in all
BEFORE_STOP_SECONDS = 1.5


@dataclass
class Load:
    answered: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)


def client(server: WebhookServer, load: Load) -> None:
    """A client that retries nothing: it opens a connection, sends on it at its rate, and opens
    another when the server closes this one (as Connection: close asks)."""
    context = ssl.create_default_context(cafile=str(server.certificates.ca_cert))
    https: http.client.HTTPSConnection | None = None
    while not load.stop.is_set():
        if https is None:
            https = http.client.HTTPSConnection(
                "localhost", server.port, context=context, timeout=10
            )
            try:
                https.connect()
            except OSError:
                # Refused: the server takes no new connections. Nothing was sent.
                https = None
                time.sleep(0.05)
                continue
        uid = str(uuid.uuid4())
        try:
            https.request("POST", "/mutate", review_body(uid), {"Content-Type": "application/json"})
            response = https.getresponse()
            body = response.read()
            assert response.status == 200, response.status
            assert json.loads(body)["response"]["uid"] == uid
            load.answered.add(uid)
            if response.will_close:
                https.close()
                https = None
        except (OSError, http.client.HTTPException, AssertionError) as error:
            load.failed[uid] = f"{type(error).__name__}: {error}"
            https.close()
            https = None
        time.sleep(1 / PER_CLIENT_RATE)
    if https is not None:
        https.close()


@pytest.mark.parametrize("silent_connection", [False, True], ids=["plain", "with a silent client"])
def test_a_stop_under_load_answers_every_review_it_read(
    tmp_path: Path, silent_connection: bool
) -> None:
    server = WebhookServer(REPO_ROOT / "policies", tmp_path / "certs", tmp_path / "g.log", {})
    server.start()
    load = Load()
    threads = [threading.Thread(target=client, args=(server, load)) for _ in range(CLIENTS)]
    silent = socket.create_connection(("127.0.0.1", server.port)) if silent_connection else None
    try:
        for thread in threads:
            thread.start()
        time.sleep(BEFORE_STOP_SECONDS)
        assert server.process is not None
        stopped_at = time.monotonic()
        server.process.terminate()
        # New connections are refused, not left waiting.
        refused_after = None
        while time.monotonic() - stopped_at < 5:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            except ConnectionRefusedError:
                refused_after = time.monotonic() - stopped_at
                break
            except TimeoutError:
                break
            time.sleep(0.02)
        code = server.process.wait(20)
        gone_after = time.monotonic() - stopped_at
    finally:
        load.stop.set()
        for thread in threads:
            thread.join(15)
        if silent is not None:
            silent.close()
        server.stop()
    read = {
        record["uid"]
        for record in server.log_records()
        if record.get("uid") and record.get("endpoint") == "mutate"
    }
    lost = {uid: why for uid, why in load.failed.items() if uid in read}
    print(
        f"\n{len(load.answered)} answered, {len(load.failed)} not sent or not read by the "
        f"server, {len(lost)} read and lost; refused after {refused_after} s, gone after "
        f"{gone_after:.1f} s"
    )
    assert code == 0
    assert len(load.answered) > 200
    assert lost == {}
    assert refused_after is not None and refused_after < 1
    assert gone_after < 3
