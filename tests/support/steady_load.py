"""Reviews sent at a steady rate over a few HTTPS connections, each answer read and kept.

Like the apiserver, the clients retry nothing: a request that fails is a failure. Each client
keeps its connection alive for a while and then opens a new one, so that every worker of the
server gets some of the load. The rate is held by a schedule, not by sleeping after each
answer, so slow answers do not lower it; a client that falls behind sends at once until it
has caught up.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from tests.support.kept_alive import review_body
from tests.support.server import WebhookServer

# What a test makes of an answer's body (given the uid it sent): a value naming the outcome,
# or an exception when the answer is wrong.
ReadAnswer = Callable[[bytes, str], Hashable]


@dataclass(frozen=True)
class Answer:
    sent_at: float  # time.monotonic() when the request went out
    seconds: float
    outcome: Hashable  # what ReadAnswer made of it
    failure: str = ""
    closed: bool = False  # the server asked to close the connection


@dataclass
class SteadyLoad:
    server: WebhookServer
    read_answer: ReadAnswer
    reviews_per_second: float
    clients: int = 4
    requests_per_connection: int = 50
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _started_at: float = 0.0
    _stopped_at: float = 0.0

    def __enter__(self) -> SteadyLoad:
        self._started_at = time.monotonic()
        for number in range(self.clients):
            thread = threading.Thread(target=self._client, args=(number,), daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(20)
        self._stopped_at = time.monotonic()

    @property
    def achieved_rate(self) -> float:
        return len(self.answers) / max(self._stopped_at - self._started_at, 1e-9)

    def failures(self) -> list[Answer]:
        return [answer for answer in self.answers if answer.failure]

    def _client(self, number: int) -> None:
        context = ssl.create_default_context(cafile=str(self.server.certificates.ca_cert))
        interval = self.clients / self.reviews_per_second
        due = time.monotonic() + interval * number / self.clients
        https: http.client.HTTPSConnection | None = None
        sent_on_connection = 0
        sequence = 0
        try:
            while not self._stop.is_set():
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                due += interval
                if https is None or sent_on_connection >= self.requests_per_connection:
                    if https is not None:
                        https.close()
                    https = http.client.HTTPSConnection(
                        "localhost", self.server.port, context=context, timeout=10
                    )
                    sent_on_connection = 0
                sequence += 1
                sent_on_connection += 1
                answer = self._review(https, f"steady-{number}-{sequence}")
                self.answers.append(answer)  # list.append is atomic
                if answer.failure or answer.closed:
                    https.close()
                    https = None
        finally:
            if https is not None:
                https.close()

    def _review(self, https: http.client.HTTPSConnection, uid: str) -> Answer:
        sent_at = time.monotonic()
        try:
            https.request("POST", "/mutate", review_body(uid), {"Content-Type": "application/json"})
            response = https.getresponse()
            body = response.read()
            if response.status != 200:
                raise AssertionError(f"HTTP {response.status}: {body[:200]!r}")
            outcome = self.read_answer(body, uid)
        except Exception as error:  # every failure is the finding
            failure = f"{type(error).__name__}: {error}"
            return Answer(sent_at, time.monotonic() - sent_at, None, failure)
        seconds = time.monotonic() - sent_at
        return Answer(sent_at, seconds, outcome, closed=response.will_close)
