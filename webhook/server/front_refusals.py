"""How the evented front (worker/front.py) tells the app about a request it answered itself.

The front refuses a body over the size limit before the app sees it; the app keeps, in
`app.extensions[REFUSALS_HOOK]`, what to call with the request's path, the HTTP status and the
reason, so that the refusal is counted and logged as the app's own refusals are. A module of
its own so that the app need not import the worker, nor the worker the app.
"""

from __future__ import annotations

from collections.abc import Callable

REFUSALS_HOOK = "gpu-webhook.refused-at-front"

Refused = Callable[[str, int, str], None]
