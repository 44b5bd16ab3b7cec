"""What a policy gets for the fields it leaves out, and the names this product writes."""

from __future__ import annotations

from webhook.policy.model import FractionHandling, GovernedResource

API_GROUP = "gpu-admission.example.com"
API_VERSION = f"{API_GROUP}/v1alpha1"
POLICY_KIND = "GPUPolicy"

# The rules where no policy matches: every GPU rule enforced, no fraction shared.
BUILT_IN_POLICY_NAME = "built-in"

DEFAULT_GOVERNED_RESOURCES = (
    GovernedResource("nvidia.com/gpu", FractionHandling.DENY),
    GovernedResource("amd.com/gpu", FractionHandling.DENY),
    GovernedResource("gpu.intel.com/i915", FractionHandling.DENY),
    GovernedResource("nvidia.com/mig-*", FractionHandling.DENY),
)

# The knobs that frameworks read to stay inside a share of GPU memory. JAX reads the older
# XLA_PYTHON_CLIENT_MEM_FRACTION too, but raises when both names are set: a container that
# sets the old one keeps it and does not get the new one.
ENV_PLACEHOLDERS = (
    "fraction",
    "percent",
    "amount",
    "unit",
    "mib",
    "bytes",
    "model",
    # What a framework may take: the share less FRAMEWORK_HEADROOM_MIB, as a fraction of the
    # memory the framework sees, in MiB and in bytes (frameworks.py).
    "frameworkFraction",
    "frameworkMiB",
    "frameworkBytes",
)

# Annotations this product writes on the pods (and pod templates) it rewrites.
POLICY_ANNOTATION = f"{API_GROUP}/policy"
SHARES_ANNOTATION = f"{API_GROUP}/shares"

# The pod annotations that KAI Scheduler and Run:ai users already write for a fraction.
FRACTION_ANNOTATION = "gpu-fraction"
# KAI Scheduler's other form of a share: GPU memory in MiB, a plain positive integer.
MEMORY_ANNOTATION = "gpu-memory"
SHARE_ANNOTATIONS = (FRACTION_ANNOTATION, MEMORY_ANNOTATION)
FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
# How many cards of a node a KAI share takes, each giving the share; one where absent.
FRACTION_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
