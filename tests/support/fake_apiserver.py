"""A thin fake of the kube-apiserver: only the namespace endpoints the label cache calls, answered
in the shapes the real API uses, over plain HTTP on 127.0.0.1.

- `GET /api/v1/namespaces`: a NamespaceList (items without kind and apiVersion, as the real
  list encodes them) at the current resourceVersion.
- `GET /api/v1/namespaces?watch=true&resourceVersion=N`: HTTP 200 and a chunked stream of
  newline-delimited watch events after N. A version older than the watch history gets one ERROR
  event carrying a 410 `Expired` Status and the end of the stream, as the watch cache answers.
  Without a version (or "0") the stream starts with an ADDED event per namespace. With
  `timeoutSeconds` the stream ends then, after a BOOKMARK when `allowWatchBookmarks=true`.
- `GET /api/v1/namespaces/{name}`: the Namespace, or the 404 `NotFound` Status.

Test code changes namespaces (each change moves the resourceVersion and reaches open watches),
can delay watch delivery, stall named reads, expire the watch history, and stop and restart the
server on the same port; state survives a restart, as etcd outlives an apiserver.
"""

from __future__ import annotations

import json
import queue
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

NAMESPACES_PATH = "/api/v1/namespaces"
NAME_LABEL = "kubernetes.io/metadata.name"
TRUE_WORDS = {"1", "t", "T", "true", "TRUE", "True"}
FALSE_WORDS = {"0", "f", "F", "false", "FALSE", "False"}

Event = dict[str, Any]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: Mapping[str, str]

    @property
    def is_watch(self) -> bool:
        return self.query.get("watch", "") in TRUE_WORDS

    @property
    def is_list(self) -> bool:
        return self.path == NAMESPACES_PATH and not self.is_watch


def status(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> Event:
    """A metav1.Status as the API encodes a failure."""
    body: Event = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return body


class FakeApiServer:
    def __init__(self, *, token: str | None = None, first_resource_version: int = 1000) -> None:
        self.token = token
        self._lock = threading.RLock()
        self._namespaces: dict[str, Event] = {}
        self._version = first_resource_version
        self._history: list[tuple[int, Event]] = []
        self._oldest_watchable = first_resource_version
        self._watchers: set[queue.Queue[Event | None]] = set()
        self._held_events: list[Event] | None = None
        self._reads_released = threading.Event()
        self._reads_released.set()
        self._requests: list[RecordedRequest] = []
        self._httpd: _Httpd | None = None
        self.port = 0

    # --- running -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self._lock:
            # A fresh apiserver's watch cache starts at the current version.
            self._history.clear()
            self._oldest_watchable = self._version
        self._httpd = _Httpd(("127.0.0.1", self.port), self)
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        """Go away at once, as a crashed apiserver does: open connections are cut."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.closed.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.cut_connections()
        with self._lock:
            self._watchers.clear()

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> FakeApiServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": self.token or "unused"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
            "current-context": "fake",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        return path

    # --- what was asked ------------------------------------------------------------------

    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def lists(self) -> list[RecordedRequest]:
        return [r for r in self.requests() if r.is_list]

    def watches(self) -> list[RecordedRequest]:
        return [r for r in self.requests() if r.is_watch]

    def reads(self, name: str | None = None) -> list[RecordedRequest]:
        prefix = NAMESPACES_PATH + "/"
        return [
            r
            for r in self.requests()
            if r.path.startswith(prefix) and (name is None or r.path == prefix + name)
        ]

    def open_watches(self) -> int:
        with self._lock:
            return len(self._watchers)

    @property
    def resource_version(self) -> str:
        with self._lock:
            return str(self._version)

    # --- changing the cluster ------------------------------------------------------------

    def add_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> Event:
        with self._lock:
            namespace = {
                "kind": "Namespace",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "uid": str(uuid.uuid4()),
                    "resourceVersion": "",
                    "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "labels": _namespace_labels(name, labels or {}),
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
            self._namespaces[name] = namespace
            return self._emit("ADDED", namespace)

    def set_labels(self, name: str, labels: Mapping[str, str]) -> Event:
        with self._lock:
            namespace = self._namespaces[name]
            namespace["metadata"]["labels"] = _namespace_labels(name, labels)
            return self._emit("MODIFIED", namespace)

    def delete_namespace(self, name: str) -> Event:
        """Deleted at once: the Terminating phase and the finalizers are not played out."""
        with self._lock:
            namespace = self._namespaces.pop(name)
            namespace["metadata"]["deletionTimestamp"] = datetime.now(UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            )
            namespace["spec"]["finalizers"] = []
            namespace["status"]["phase"] = "Terminating"
            return self._emit("DELETED", namespace)

    def advance(self, writes: int = 1) -> str:
        """Writes to other resources move the cluster's resourceVersion on."""
        with self._lock:
            self._version += writes
            return str(self._version)

    def expire_watches(self, changes: Callable[[], object] | None = None) -> None:
        """Close every open watch, make `changes` while none is open, then drop the watch
        history: a watch resumed from any version seen so far gets 410 Expired."""
        with self._lock:
            for watcher in self._watchers:
                watcher.put(None)
            self._watchers.clear()
            if changes is not None:
                changes()
            self._version += 1
            self._history.clear()
            self._oldest_watchable = self._version

    @contextmanager
    def delayed_watch_events(self) -> Iterator[None]:
        """Watch events wait until the block ends, as they do behind a lagging watch cache."""
        with self._lock:
            self._held_events = []
        try:
            yield
        finally:
            with self._lock:
                held, self._held_events = self._held_events or [], None
                for event in held:
                    self._deliver(event)

    @contextmanager
    def stalled_reads(self) -> Iterator[None]:
        """`GET /api/v1/namespaces/{name}` is read at once but answered when the block ends."""
        self._reads_released.clear()
        try:
            yield
        finally:
            self._reads_released.set()

    # --- serving (handler threads) -------------------------------------------------------

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def namespace_list(self) -> Event:
        with self._lock:
            items = []
            for namespace in self._namespaces.values():
                item = json.loads(json.dumps(namespace))
                del item["kind"], item["apiVersion"]
                items.append(item)
            return {
                "kind": "NamespaceList",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(self._version)},
                "items": items,
            }

    def namespace(self, name: str) -> Event | None:
        with self._lock:
            found = self._namespaces.get(name)
            answer = json.loads(json.dumps(found)) if found is not None else None
        self._reads_released.wait()
        return answer

    def subscribe(self, since: str) -> tuple[list[Event], queue.Queue[Event | None] | None]:
        """The events a watch from `since` starts with, and the queue of later ones (None when
        the watch ends after its first events)."""
        with self._lock:
            if since in ("", "0"):
                first = [
                    {"type": "ADDED", "object": json.loads(json.dumps(namespace))}
                    for namespace in self._namespaces.values()
                ]
            else:
                version = int(since)
                if version < self._oldest_watchable:
                    message = f"too old resource version: {version} ({self._oldest_watchable})"
                    return [{"type": "ERROR", "object": status(410, "Expired", message)}], None
                first = [event for at, event in self._history if at > version]
            later: queue.Queue[Event | None] = queue.Queue()
            self._watchers.add(later)
            return first, later

    def unsubscribe(self, watcher: queue.Queue[Event | None]) -> None:
        with self._lock:
            self._watchers.discard(watcher)

    def bookmark(self) -> Event:
        with self._lock:
            return {
                "type": "BOOKMARK",
                "object": {
                    "kind": "Namespace",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": str(self._version)},
                },
            }

    def _emit(self, kind: str, namespace: Event) -> Event:
        self._version += 1
        namespace["metadata"]["resourceVersion"] = str(self._version)
        event = {"type": kind, "object": json.loads(json.dumps(namespace))}
        self._history.append((self._version, event))
        if self._held_events is not None:
            self._held_events.append(event)
        else:
            self._deliver(event)
        return event

    def _deliver(self, event: Event) -> None:
        for watcher in self._watchers:
            watcher.put(event)


def _namespace_labels(name: str, labels: Mapping[str, str]) -> dict[str, str]:
    # The API sets this label on every namespace; Go encodes map keys sorted.
    return dict(sorted({**labels, NAME_LABEL: name}.items()))


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], api: FakeApiServer) -> None:
        self.api = api
        self.closed = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client or a test that cut the connection is no error here."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `FakeApiServer.requests()` instead."""

    def do_GET(self) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        api.record(RecordedRequest(self.command, url.path, query))
        if self.command != "GET":
            message = "the server does not allow this method on the requested resource"
            self._send_json(405, status(405, "MethodNotAllowed", message, {}))
            return
        if api.token is not None and self.headers.get("Authorization") != f"Bearer {api.token}":
            self._send_json(401, status(401, "Unauthorized", "Unauthorized"))
            return
        watching = query.get("watch", "false")
        if watching not in TRUE_WORDS | FALSE_WORDS:
            self._send_json(400, status(400, "BadRequest", f"invalid watch: {watching!r}"))
            return
        if url.path == NAMESPACES_PATH:
            if watching in TRUE_WORDS:
                self._serve_watch(query)
            else:
                self._send_json(200, api.namespace_list())
            return
        name = url.path.removeprefix(NAMESPACES_PATH + "/")
        if url.path.startswith(NAMESPACES_PATH + "/") and name and "/" not in name:
            found = api.namespace(name)
            if self.server.closed.is_set():
                return
            if found is None:
                details = {"name": name, "kind": "namespaces"}
                message = f'namespaces "{name}" not found'
                self._send_json(404, status(404, "NotFound", message, details))
            else:
                self._send_json(200, found)
            return
        missing = "the server could not find the requested resource"
        self._send_json(404, status(404, "NotFound", missing, {}))

    # The label cache only reads; anything else is recorded, so a test sees it, and refused.
    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _serve_watch(self, query: Mapping[str, str]) -> None:
        api = self.server.api
        try:
            first, later = api.subscribe(query.get("resourceVersion", ""))
        except ValueError:
            version = query.get("resourceVersion")
            self._send_json(400, status(400, "BadRequest", f"invalid resource version {version}"))
            return
        timeout = query.get("timeoutSeconds")
        deadline = time.monotonic() + int(timeout) if timeout else None
        bookmarks = query.get("allowWatchBookmarks", "false") in TRUE_WORDS
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in first:
                self._send_chunk(event)
            while later is not None and not self.server.closed.is_set():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    if bookmarks:
                        self._send_chunk(api.bookmark())
                    break
                try:
                    event = later.get(timeout=min(0.05, left) if left is not None else 0.05)
                except queue.Empty:
                    if self._client_gone():
                        return
                    continue
                if event is None:
                    break
                self._send_chunk(event)
            if not self.server.closed.is_set():
                self.wfile.write(b"0\r\n\r\n")
        finally:
            if later is not None:
                api.unsubscribe(later)

    def _client_gone(self) -> bool:
        """The apiserver ends a watch whose client hung up; a silent watch must look."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _send_chunk(self, event: Event) -> None:
        line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")

    def _send_json(self, code: int, body: Event) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
