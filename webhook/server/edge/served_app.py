"""The one door between the serving edge and the application: what gunicorn serves.

The edge (this package: the worker, its evented front, the TLS sockets and contexts) knows the
application only as a `ServedApp`: the WSGI callable, and the one callback through which the
front tells it about a request it answered itself (one it could not frame, or over a limit, or
late) with the request's path, the HTTP status (None where the client closed before an answer
could be written) and the reason, so that the client fault is counted and logged as the app's
own refusals are. The app knows nothing of the edge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

Refused = Callable[[str, int | None, str], None]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class ServedApp:
    wsgi: WsgiApp
    refused: Refused

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return self.wsgi(environ, start_response)


def refusal_callback(served: object) -> Refused | None:
    """The callback of what gunicorn loaded, where it is a `ServedApp` (another WSGI app, the
    benchmark's floor, hears of no refusal)."""
    return served.refused if isinstance(served, ServedApp) else None
