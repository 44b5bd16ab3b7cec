"""`python -m webhook.probe run` (webhook/probe/__main__.py and session.py): its exit codes, its
reports, the check for a GPU, and the promise that the whole package runs on the standard
library alone, in a framework image where nothing else of ours is installed."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from webhook.probe.__main__ import main
from webhook.probe.gpu import missing_gpu

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBE_PACKAGE = REPO_ROOT / "webhook" / "probe"
FAKES = REPO_ROOT / "tests" / "fixtures" / "probe" / "fake-frameworks"
NO_GPU = "no NVIDIA GPU here: no /dev/nvidia<N> device, and no nvidia-smi on the PATH"


def probe(*args: str, gpu: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err, find_missing_gpu=lambda: gpu)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def fake_frameworks(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch, jax and cupy stand-ins, found by this process and imported by its children."""
    monkeypatch.syspath_prepend(str(FAKES))
    monkeypatch.setenv("PYTHONPATH", str(FAKES))
    for name in ("FAKE_MPS_DAEMON", "FAKE_GPU_BEHAVIOUR", "FAKE_GPU_ABSENT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"):
        monkeypatch.delenv(name, raising=False)
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "CUPY_GPU_MEMORY_LIMIT"):
        monkeypatch.delenv(name, raising=False)


def share_file(tmp_path: Path, env: dict[str, str], mib: int = 2048) -> Path:
    path = tmp_path / "share.json"
    path.write_text(json.dumps({"shareMiB": mib, "env": env, "policy": "default"}))
    return path


EACH_TOLD = {
    "XLA_CLIENT_MEM_FRACTION": "0.25",
    "PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:0.25",
    "CUPY_GPU_MEMORY_LIMIT": "25%",
}


# Exit codes -------------------------------------------------------------------------------


def test_without_a_gpu_it_says_so_in_one_line_and_exits_2() -> None:
    code, out, err = probe("run", "--share-mib", "2048", gpu=NO_GPU)
    assert (code, out) == (2, "")
    assert err == f"python -m webhook.probe run: {NO_GPU}\n"


@pytest.mark.usefixtures("fake_frameworks")
def test_a_share_every_framework_keeps_to_exits_0(tmp_path: Path) -> None:
    code, out, err = probe("run", "--share-file", str(share_file(tmp_path, EACH_TOLD)))
    assert code == 0, out + err
    assert out.rstrip().endswith("the share holds for torch, jax, cupy")
    assert "share: 2048 MiB (policy default)" in out
    assert "torch: taking 512 MiB at a time, up to 2560 MiB" in err


@pytest.mark.usefixtures("fake_frameworks")
def test_a_share_one_framework_ignores_exits_1(tmp_path: Path) -> None:
    env = {key: value for key, value in EACH_TOLD.items() if not key.startswith("PYTORCH")}
    code, out, _ = probe("run", "--share-file", str(share_file(tmp_path, env)))
    assert code == 1
    assert out.rstrip().endswith("the share does not hold for torch (over)")
    torch_row = next(line for line in out.splitlines() if line.startswith("torch"))
    assert torch_row.split()[2:6] == [">=2560", "2048", "no", "yes"]


@pytest.mark.usefixtures("fake_frameworks")
def test_an_env_file_goes_over_the_share_file(tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text("PYTORCH_CUDA_ALLOC_CONF=no_such_option:1\n")
    args = ["run", "--share-file", str(share_file(tmp_path, EACH_TOLD)), "--json"]
    code, out, _ = probe(*args, "--env-file", str(env_file), "--frameworks", "torch")
    report = json.loads(out)
    assert code == 1 and report["holds"] is False
    assert report["env"]["PYTORCH_CUDA_ALLOC_CONF"] == "no_such_option:1"
    (torch,) = report["frameworks"]
    assert (torch["verdict"], torch["alive"], torch["gotMiB"]) == ("broken", False, 0)
    assert "Unrecognized key 'no_such_option'" in torch["error"]


@pytest.mark.usefixtures("fake_frameworks")
def test_the_pods_own_annotations_give_the_share_and_its_env_is_the_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in EACH_TOLD.items():
        monkeypatch.setenv(name, value)
    record = '{\\"model\\":\\"Tesla-T4\\",\\"pinned\\":false,\\"containers\\":{\\"probe\\":'
    record += '{\\"asked\\":\\"nvidia.com/gpu=0.25\\",\\"vram\\":\\"2048\\",\\"env\\":[]}}}'
    path = tmp_path / "annotations"
    path.write_text(
        f'gpu-admission.example.com/policy="default"\ngpu-admission.example.com/shares="{record}"'
    )
    code, out, err = probe("run", "--annotations", str(path), "--frameworks", "jax,cupy")
    assert code == 0, out + err
    assert "share: 2048 MiB (container probe, policy default, model Tesla-T4" in out
    assert "env:" not in out


@pytest.mark.usefixtures("fake_frameworks")
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--share-mib", "256"], "--step-mib 512 is more than the share of 256 MiB"),
        (["--share-mib", "2048", "--frameworks", "tensorflow"], "tensorflow: not installed"),
        (["--share-file", "/nonexistent/share.json"], "cannot be read"),
        (["--annotations", "/nonexistent/annotations"], "cannot be read"),
    ],
    ids=["a step larger than the share", "a framework not here", "no share file", "no file"],
)
def test_what_cannot_be_measured_exits_2_with_the_reason(args: list[str], words: str) -> None:
    code, out, err = probe("run", *args)
    assert (code, out) == (2, "")
    assert err.startswith("python -m webhook.probe run: ") and words in err


def test_with_no_framework_installed_there_is_nothing_to_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("webhook.probe.session.installed_frameworks", lambda *names: ())
    code, _, err = probe("run", "--share-mib", "2048")
    assert code == 2 and "no framework to probe: none of torch, jax, cupy, tensorflow" in err


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["run"],
        ["run", "--share-mib", "0"],
        ["run", "--share-mib", "2048", "--share-file", "x"],
        ["run", "--share-mib", "2048", "--frameworks", "torch,mxnet"],
        ["run", "--share-mib", "2048", "--container", "probe"],
        ["run", "--share-mib", "2048", "--timeout", "0"],
    ],
    ids=[
        "no command",
        "no share",
        "a share of nothing",
        "two shares",
        "an unknown framework",
        "a container without annotations",
        "no time",
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    code, out, err = probe(*args)
    assert (code, out) == (2, "")
    assert "usage: python -m webhook.probe" in err


# The GPU check -----------------------------------------------------------------------------


def dev_with(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / name).touch()
    return tmp_path


H200_LISTING = "GPU 0: NVIDIA H200 (UUID: GPU-5f3c0000-0000-0000-0000-000000000000)\n"


@pytest.mark.parametrize(
    ("devices", "smi", "listing", "found"),
    [
        (["nvidia0", "nvidiactl"], None, None, True),
        (["nvidia3", "nvidia-uvm"], None, None, True),
        (["nvidiactl", "nvidia-uvm"], None, None, False),
        ([], "/usr/bin/nvidia-smi", H200_LISTING, True),
        ([], "/usr/bin/nvidia-smi", "No devices were found\n", False),
        ([], "/usr/bin/nvidia-smi", None, False),
    ],
    ids=[
        "device 0",
        "another card's device",
        "the driver's files without a card",
        "nvidia-smi lists one",
        "nvidia-smi lists none",
        "nvidia-smi fails",
    ],
)
def test_a_gpu_is_found_by_its_device_file_or_by_nvidia_smi(
    tmp_path: Path, devices: list[str], smi: str | None, listing: str | None, found: bool
) -> None:
    missing = missing_gpu(
        dev_with(tmp_path, *devices), which=lambda name: smi, list_gpus=lambda path: listing
    )
    assert (missing is None) is found
    if missing:
        assert missing.startswith("no NVIDIA GPU here: ") and "\n" not in missing


# The standard library alone ----------------------------------------------------------------


def test_the_probe_package_imports_nothing_beyond_the_standard_library() -> None:
    # -S: no site-packages at all, so anything else would fail to import.
    script = (
        "import sys\n"
        "import webhook.probe.__main__, webhook.probe.take\n"
        "names = {name.partition('.')[0] for name in sys.modules}\n"
        "print(sorted(names - set(sys.stdlib_module_names) - {'webhook', '__main__'}))\n"
    )
    listed = subprocess.run(
        [sys.executable, "-S", "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (listed.returncode, listed.stdout.strip()) == (0, "[]"), listed.stderr


@pytest.mark.parametrize("module", sorted(path.name for path in PROBE_PACKAGE.glob("*.py")))
def test_each_probe_module_names_only_standard_modules_and_its_own(module: str) -> None:
    tree = ast.parse((PROBE_PACKAGE / module).read_text())
    assert ast.get_docstring(tree), f"{module} says why it exists"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            top = name.partition(".")[0]
            assert top in sys.stdlib_module_names or name.startswith("webhook.probe"), name
