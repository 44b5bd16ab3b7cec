"""An action run every few seconds on a daemon thread of the process that serves."""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("webhook")


class Periodically:
    """Calls `action` every `seconds` once started. With `last_act`, calls it a last time when
    stopped or when the interpreter exits (a gunicorn worker's graceful exit), so that nothing
    it hands on is left behind. Start it in the process that acts: threads do not survive a
    fork. A fault in `action` is logged as `what` failed, once while it repeats, and never
    stops the thread."""

    def __init__(
        self,
        seconds: float,
        action: Callable[[], object],
        what: str,
        *,
        thread_name: str,
        last_act: bool,
    ) -> None:
        self.seconds = seconds
        self._action = action
        self._what = what
        self._thread_name = thread_name
        self._last_act = last_act
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_fault = ""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()
        if self._last_act:
            atexit.register(self.stop)

    def stop(self, timeout: float | None = 5) -> None:
        if self._thread is None or self._stopping.is_set():
            return
        self._stopping.set()
        self._thread.join(timeout)
        if self._last_act:
            atexit.unregister(self.stop)
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
                log.exception("%s failed", self._what)
                self._last_fault = text
        else:
            self._last_fault = ""
