"""`python -m webhook.probe`: whether a share of a GPU holds on this node, measured by taking
memory through each installed framework with the share's env (docs/probe.md).

A share is a number in the pod spec until something enforces it, and only a run on the card
shows what does. This package runs where that is: inside a team's framework image (PyTorch,
JAX, CuPy, TensorFlow), into which only our source tree is copied (deploy/probe/). So every
module here imports the Python standard library alone, and runs on Python 3.8 and later.
"""
