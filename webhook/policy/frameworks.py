"""The variables that keep each framework inside a share, and the ones a hard limit needs.

A share is a number in the pod spec until something enforces it. A *hard* limit is one the
card, the driver or an interposed library keeps (a MIG slice, an MPS pinned limit with the
daemon running, HAMi-core); a framework told its share through its environment keeps an
*advisory* one, and only if the image's version reads the variable. Every figure and version
here was measured on an NVIDIA H200 or read in the framework's source at a named release
(docs/frameworks.md has the table and the sources):

- JAX reads `XLA_CLIENT_MEM_FRACTION` (jaxlib 0.4.33 on; it refuses the older
  `XLA_PYTHON_CLIENT_MEM_FRACTION` beside it and falls back to the CPU, so a container that
  sets the older one keeps it) and preallocates that fraction of the device's total.
- PyTorch reads `per_process_memory_fraction` in its allocator settings from 2.10.0; 2.9 and
  older raise `Unrecognized CachingAllocator option` at the first CUDA allocation, so the key
  breaks their pods and PyTorch is never a default: a policy lists it only for images on
  torch 2.10 or later. When both `PYTORCH_CUDA_ALLOC_CONF` and `PYTORCH_ALLOC_CONF` are set,
  torch reads the first alone, so the entry goes to the one the container uses. The
  `cudaMallocAsync` backend ignores the fraction.
- CuPy reads `CUPY_GPU_MEMORY_LIMIT` (7.0 on), here in bytes, which no total can misread.
- TensorFlow reads no limit from its environment: `TF_FORCE_GPU_ALLOW_GROWTH` only keeps it
  from taking the whole card at start.

Advisory limits sit inside the share, never at its edge: FRAMEWORK_HEADROOM_MIB stays free
for the CUDA context and the allocator's granularity. Measured on an H200 under an MPS limit
of a quarter share, JAX aborted with 256 MiB of room and ran with 512.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from webhook.policy.model import Backend, EnvTemplate, Framework, HardLimit, Sharing

FRAMEWORK_HEADROOM_MIB = 512

FRAMEWORK_ENV: Mapping[Framework, tuple[EnvTemplate, ...]] = MappingProxyType(
    {
        Framework.JAX: (
            EnvTemplate(
                "XLA_CLIENT_MEM_FRACTION",
                "{frameworkFraction}",
                unless_set=("XLA_PYTHON_CLIENT_MEM_FRACTION",),
            ),
        ),
        Framework.PYTORCH: (
            EnvTemplate(
                "PYTORCH_CUDA_ALLOC_CONF",
                "per_process_memory_fraction:{frameworkFraction}",
                merge_key="per_process_memory_fraction",
                also_named=("PYTORCH_ALLOC_CONF",),
            ),
        ),
        Framework.CUPY: (EnvTemplate("CUPY_GPU_MEMORY_LIMIT", "{frameworkBytes}"),),
        Framework.TENSORFLOW: (EnvTemplate("TF_FORCE_GPU_ALLOW_GROWTH", "true"),),
    }
)

# The frameworks whose variables limit them; TensorFlow's only slows its start.
LIMITED_FRAMEWORKS = frozenset({Framework.JAX, Framework.PYTORCH, Framework.CUPY})


def told_their_limit(sharing: Sharing) -> list[str]:
    """The frameworks a pool's env gives a limit, by name; TensorFlow's variable is none."""
    return [framework.value for framework in sharing.frameworks if framework in LIMITED_FRAMEWORKS]


# Where no `frameworks` and no `env` are written: every framework whose variable breaks no
# version of it.
DEFAULT_FRAMEWORKS = (Framework.JAX, Framework.CUPY, Framework.TENSORFLOW)

# The variables a hard limit needs in the container. MIG needs none; HAMi-core's own are set
# by the system that gives the share: HAMi's device plugin (`CUDA_DEVICE_MEMORY_LIMIT_<i>`),
# or KAI's webhook, which replaces any `CUDA_DEVICE_MEMORY_LIMIT` of the container with one
# read from the ConfigMap its binder fills (KAI-Scheduler hamicore.go L34-67).
HARD_LIMIT_ENV: Mapping[HardLimit, tuple[EnvTemplate, ...]] = MappingProxyType(
    {
        HardLimit.MPS: (
            EnvTemplate("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0={mib}M"),
            EnvTemplate("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "{percent}"),
        ),
    }
)

# The hard limits each backend can have, the first its default.
BACKEND_HARD_LIMITS: Mapping[Backend, tuple[HardLimit, ...]] = MappingProxyType(
    {
        Backend.EXTENDED_RESOURCE: (HardLimit.NONE, HardLimit.MPS),
        Backend.TIME_SLICING: (HardLimit.NONE, HardLimit.MPS),
        Backend.GPUSHARE: (HardLimit.NONE, HardLimit.MPS),
        Backend.KAI: (HardLimit.NONE, HardLimit.HAMI_CORE),
        Backend.HAMI: (HardLimit.HAMI_CORE,),
        Backend.MIG: (HardLimit.MIG,),
        # NVIDIA's driver holds no memory of a consumable share; HAMi's holds it with HAMi-core.
        Backend.DRA: (HardLimit.NONE, HardLimit.HAMI_CORE),
    }
)


def hard_limit_env(hard_limit: HardLimit) -> tuple[EnvTemplate, ...]:
    """What the container needs from this webhook for its hard limit."""
    return HARD_LIMIT_ENV.get(hard_limit, ())
