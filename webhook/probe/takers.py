"""The child program: take GPU memory through one framework, step by step, until the framework
refuses or the probe's stop is reached, and print one TakeResult line (run as
`python -m webhook.probe.take <framework> --step-mib 512 --stop-mib N`).

Each step is allocated and filled, so that it is really backed (memory that a lazy allocator
never touched proves nothing), and every step is held to the end: what the process got is what
it held at once. The framework is imported here, in a child of its own, so that one that aborts
(JAX under an MPS limit its preallocation does not fit) takes down this process and not the
probe, and one framework's memory is gone before the next one starts.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any

from webhook.probe.take_result import ON_GPU, UNKNOWN_PLATFORM, Stopped, TakeResult, first_line

MIB = 1024 * 1024


class Framework:
    """One framework's way to take device memory; `load` imports it, the rest use it."""

    name = ""

    def load(self) -> str:
        """Imports the framework; its version."""
        raise NotImplementedError

    def platform(self) -> str:
        """Where the framework computes: "gpu", or what it fell back to."""
        raise NotImplementedError

    def take(self, mib: int) -> object:
        """`mib` MiB of device memory, filled, as an object that holds it while referenced."""
        raise NotImplementedError

    def is_refusal(self, error: Exception) -> bool:
        """Whether `error` is the framework's out-of-memory error."""
        raise NotImplementedError

    def total_mib(self) -> int | None:
        return None

    def limit_mib(self) -> int | None:
        return None


class Torch(Framework):
    name = "torch"
    torch: Any = None

    def load(self) -> str:
        self.torch = import_module("torch")
        return str(self.torch.__version__)

    def platform(self) -> str:
        return ON_GPU if self.torch.cuda.is_available() else "cpu"

    def take(self, mib: int) -> object:
        block = self.torch.empty(mib * MIB, dtype=self.torch.uint8, device="cuda")
        block.fill_(1)
        self.torch.cuda.synchronize()
        return block

    def is_refusal(self, error: Exception) -> bool:
        # OutOfMemoryError since PyTorch 1.13; a RuntimeError saying so before it. An unknown
        # PYTORCH_CUDA_ALLOC_CONF key is a ValueError at the first allocation: not a refusal.
        out_of_memory = getattr(self.torch.cuda, "OutOfMemoryError", None)
        if out_of_memory is not None and isinstance(error, out_of_memory):
            return True
        return isinstance(error, RuntimeError) and "out of memory" in str(error)

    def total_mib(self) -> int | None:
        return int(self.torch.cuda.get_device_properties(0).total_memory) // MIB


class Jax(Framework):
    name = "jax"
    jax: Any = None
    jnp: Any = None

    def load(self) -> str:
        self.jax = import_module("jax")
        self.jnp = import_module("jax.numpy")
        return str(self.jax.__version__)

    def platform(self) -> str:
        # JAX falls back to the CPU, with a warning only, when its GPU plugin fails (as it does
        # when XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are both set).
        return str(self.jax.devices()[0].platform)

    def take(self, mib: int) -> object:
        block = self.jnp.ones((mib * MIB,), dtype=self.jnp.uint8)
        block.block_until_ready()
        return block

    def is_refusal(self, error: Exception) -> bool:
        return "RESOURCE_EXHAUSTED" in str(error)

    def limit_mib(self) -> int | None:
        stats = self.jax.devices()[0].memory_stats() or {}
        limit = stats.get("bytes_limit")
        return int(limit) // MIB if limit else None


class Cupy(Framework):
    name = "cupy"
    cupy: Any = None

    def load(self) -> str:
        self.cupy = import_module("cupy")
        return str(self.cupy.__version__)

    def platform(self) -> str:
        # Raises CUDARuntimeError (cudaErrorNoDevice) where there is none.
        return ON_GPU if self.cupy.cuda.runtime.getDeviceCount() > 0 else "none"

    def take(self, mib: int) -> object:
        block = self.cupy.empty(mib * MIB, dtype=self.cupy.uint8)
        block.fill(1)
        self.cupy.cuda.Device().synchronize()
        return block

    def is_refusal(self, error: Exception) -> bool:
        return isinstance(error, self.cupy.cuda.memory.OutOfMemoryError)

    def total_mib(self) -> int | None:
        return int(self.cupy.cuda.runtime.memGetInfo()[1]) // MIB

    def limit_mib(self) -> int | None:
        # 0 when CUPY_GPU_MEMORY_LIMIT sets none.
        limit = int(self.cupy.get_default_memory_pool().get_limit())
        return limit // MIB if limit else None


class TensorFlow(Framework):
    name = "tensorflow"
    tf: Any = None

    def load(self) -> str:
        self.tf = import_module("tensorflow")
        return str(self.tf.__version__)

    def platform(self) -> str:
        return ON_GPU if self.tf.config.list_physical_devices("GPU") else "cpu"

    def take(self, mib: int) -> object:
        tf = self.tf
        with tf.device("/GPU:0"):
            # float32, which has a GPU fill kernel in every release: with soft placement, an op
            # without one would run on the CPU and take host memory instead.
            block = tf.ones([mib * MIB // 4], dtype=tf.float32)
        if "GPU" not in str(block.device).upper():
            raise RuntimeError(f"TensorFlow placed the memory on {block.device}, not on a GPU")
        block[:1].numpy()  # waits for the fill
        return block

    def is_refusal(self, error: Exception) -> bool:
        return isinstance(error, self.tf.errors.ResourceExhaustedError)


FRAMEWORKS: dict[str, Callable[[], Framework]] = {
    "torch": Torch,
    "jax": Jax,
    "cupy": Cupy,
    "tensorflow": TensorFlow,
}


def take_memory(
    framework: Framework,
    *,
    step_mib: int,
    stop_mib: int,
    clock: Callable[[], float] = time.monotonic,
) -> TakeResult:
    """Takes `step_mib` at a time and holds it all, until the framework refuses a step or
    `stop_mib` is held. Never raises for what the framework does: an error is a result."""
    started = clock()
    held: list[object] = []
    got = 0
    version = ""
    platform = ""
    stopped: Stopped = "exceeded"
    error = ""
    try:
        version = framework.load()
        platform = framework.platform()
        if platform != ON_GPU:
            stopped = "error"
            error = f"{framework.name} runs on {platform}, not on a GPU"
        while stopped == "exceeded" and got < stop_mib:
            try:
                held.append(framework.take(step_mib))
            except Exception as refused:
                if not framework.is_refusal(refused):
                    raise
                stopped, error = "refused", _describe(refused)
                break
            got += step_mib
    except Exception as failure:
        stopped, error = "error", _describe(failure)
    return TakeResult(
        framework=framework.name,
        version=version,
        got_mib=got,
        stopped=stopped,
        step_mib=step_mib,
        error=error,
        total_mib=_quietly(framework.total_mib) if platform == ON_GPU else None,
        limit_mib=_quietly(framework.limit_mib) if platform == ON_GPU else None,
        platform=platform or UNKNOWN_PLATFORM,
        seconds=round(clock() - started, 1),
    )


def _describe(error: BaseException) -> str:
    return first_line(f"{type(error).__name__}: {error}")


def _quietly(read: Callable[[], int | None]) -> int | None:
    """A figure for the record, which must not turn a finished run into an error."""
    try:
        return read()
    except Exception:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m webhook.probe.take",
        description="Take GPU memory through one framework until it refuses or STOP MiB are "
        "held, and print the result as one line of JSON.",
    )
    parser.add_argument("framework", choices=sorted(FRAMEWORKS))
    parser.add_argument("--step-mib", type=positive_int, default=512, metavar="MIB")
    parser.add_argument("--stop-mib", type=positive_int, required=True, metavar="MIB")
    args = parser.parse_args(argv)
    result = take_memory(
        FRAMEWORKS[args.framework](), step_mib=args.step_mib, stop_mib=args.stop_mib
    )
    sys.stdout.write(result.line() + "\n")
    sys.stdout.flush()
    return 0


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not above 0")
    return value
