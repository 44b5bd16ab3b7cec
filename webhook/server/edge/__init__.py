"""The serving edge: what stands between gunicorn and the application. The worker
(worker.py) and its evented front (front.py, request_framing.py), the table its workers share
(connection_table.py), the TLS sockets and contexts (stall_limited_tls.py, tls_context.py).
Its one contract with the application is served_app.py, which is all the application imports of
it; what each piece buys is measured in the benchmark (bench/README.md, "The serving edge,
piece by piece")."""
