"""The node side of memory sharing: nodes advertise the VRAM resource that rewritten pods ask for
(`python -m webhook advertise`)."""
