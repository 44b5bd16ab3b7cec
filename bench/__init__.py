"""The benchmark: `python -m bench` measures the webhook over HTTP against a floor that does no
admission work, and its decision in-process, and checks the results against targets."""
