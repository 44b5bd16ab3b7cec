"""Fuzzing the admission webhook: generated AdmissionReviews of every shape, judged in this
process (test_in_process.py, and `python -m tests.fuzz.soak` for long runs) and posted to the
real server over TLS (test_server.py). properties.py says what must hold of every answer."""
