"""The gunicorn worker the webhook is served by, and the table its workers share."""

from webhook.server.worker.connection_table import ConnectionTable, WorkerRow
from webhook.server.worker.thread_worker import KeepAliveThreadWorker

__all__ = ["ConnectionTable", "KeepAliveThreadWorker", "WorkerRow"]
