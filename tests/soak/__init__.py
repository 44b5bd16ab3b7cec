"""Long runs for `make soak`: each prints its figures and exits non-zero when a bound is broken."""
