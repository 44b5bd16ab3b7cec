"""The offline tools: `python -m webhook lint`, `review` and `test`."""
