"""GPU admission webhook: GPU request rules, fractional GPUs rewritten into VRAM, from policy."""
