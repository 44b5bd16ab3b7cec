"""GPU admission webhook: GPU request rules, fractional GPUs rewritten into VRAM, from policy."""

# The one place the version is written: the package metadata (pyproject.toml) reads it here.
__version__ = "0.1.0"
