"""Calls of the kubernetes client that send and read JSON as the API encodes it.

The client's methods are typed for its model classes, which drop fields they do not know and
cost a conversion each way. Given `_preload_content=False` a method returns the HTTP response
instead, and it takes a plain dict as a body: `call` makes such a call and decodes the answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`method(*args, **kwargs)`, its answer decoded from JSON."""
    response = method(*args, _preload_content=False, **kwargs)
    return json.loads(response.data)
