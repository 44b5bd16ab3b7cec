"""How the evented front (worker/front.py) tells the app about a request it answered itself.

The front refuses a request it cannot frame, or that is over a limit or late, before the app
sees it; the app keeps, in `app.extensions[REFUSALS_HOOK]`, what to call with the request's
path, the HTTP status (None where the client closed before an answer could be written) and the
reason, so that the client fault is counted and logged as the app's own refusals are. A module of
its own so that the app need not import the worker, nor the worker the app.
"""

from __future__ import annotations

from collections.abc import Callable

REFUSALS_HOOK = "gpu-webhook.refused-at-front"

Refused = Callable[[str, int | None, str], None]
