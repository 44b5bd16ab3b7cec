"""An action run every few seconds on a daemon thread, and once more when the process exits."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("webhook")


class Periodically:
    """Calls `action` every `seconds` once started, and a last time when stopped or when the
    interpreter exits (a gunicorn worker's graceful exit), so that nothing it would have
    handed on is left behind. Start it in the process that acts: threads do not survive a
    fork. A fault in `action` is logged, once while it repeats, and never stops the thread."""

    def __init__(self, seconds: float, action: Callable[[], None], name: str) -> None:
        self.seconds = seconds
        self._action = action
        self._name = name
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_fault = ""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def stop(self) -> None:
        if self._thread is None or self._stopping.is_set():
            return
        self._stopping.set()
        atexit.unregister(self.stop)
        self._thread.join(timeout=5)
        self._act()

    def _run(self) -> None:
        while not self._stopping.wait(self.seconds):
            self._act()

    def _act(self) -> None:
        try:
            self._action()
        except Exception as error:
            text = f"{type(error).__name__}: {error}"
            if text != self._last_fault:
                log.exception("%s failed", self._name)
                self._last_fault = text
        else:
            self._last_fault = ""
