"""The serving edge: what stands between gunicorn and the application. The worker
(worker.py) and its evented front (front.py, request_framing.py), the table its workers share
(connection_table.py), the TLS sockets and contexts (stall_limited_tls.py, tls_context.py).
Its one contract with the application is served_app.py; what each piece buys is measured in
the benchmark (bench/README.md, "What each piece of the serving edge buys")."""

from webhook.server.edge.connection_table import ConnectionTable, WorkerRow
from webhook.server.edge.worker import KeepAliveThreadWorker

__all__ = ["ConnectionTable", "KeepAliveThreadWorker", "WorkerRow"]
