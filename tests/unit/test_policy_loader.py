from pathlib import Path

import pytest

from tests.support.policy_files import load_problems, write_policy
from webhook.policy.defaults import DEFAULT_GOVERNED_RESOURCES
from webhook.policy.frameworks import DEFAULT_FRAMEWORKS, FRAMEWORK_ENV
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import FractionHandling, Framework, HardLimit, MultiGpuNodes
from webhook.policy.policy_set import PolicySet

REPO_POLICIES = Path(__file__).resolve().parents[2] / "policies"

HEADER = """\
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata:
  name: team
"""

SHARING = """\
  sharing:
    vramResource: example.com/vram
    defaultModel: Tesla-T4
    models:
      - {product: Tesla-T4, memoryMiB: 15360}
"""


def test_the_shipped_policies_load() -> None:
    (policy,) = load_policy_directory(REPO_POLICIES)
    assert policy.name == "default"
    assert policy.governing("nvidia.com/gpu").fractions is FractionHandling.REWRITE
    assert policy.governing("nvidia.com/mig-1g.5gb") is not None
    assert policy.sharing is not None and policy.sharing.default_model in policy.sharing.models


def test_omitted_fields_get_the_documented_defaults(tmp_path: Path) -> None:
    write_policy(tmp_path, HEADER + "spec:\n" + SHARING)
    (policy,) = load_policy_directory(tmp_path)
    assert policy.resources == DEFAULT_GOVERNED_RESOURCES
    assert policy.sharing is not None
    assert policy.sharing.frameworks == DEFAULT_FRAMEWORKS
    assert policy.sharing.env == tuple(t for f in DEFAULT_FRAMEWORKS for t in FRAMEWORK_ENV[f])
    assert Framework.PYTORCH not in policy.sharing.frameworks
    assert policy.sharing.hard_limit is HardLimit.NONE
    assert policy.sharing.unit == "MiB"
    assert policy.sharing.model_label == "nvidia.com/gpu.product"
    assert policy.whole_gpu.resource_tolerations is True
    assert policy.sharing.runtime_class_name is None


def test_the_runtime_class_of_shared_pods_is_read(tmp_path: Path) -> None:
    write_policy(tmp_path, HEADER + "spec:\n" + SHARING + "    runtimeClassName: nvidia\n")
    (policy,) = load_policy_directory(tmp_path)
    assert policy.sharing is not None
    assert policy.sharing.runtime_class_name == "nvidia"


NODE_POOLS = [
    ("", None, MultiGpuNodes.SKIP),
    (
        "    placement:\n      nodeSelector: {pool: shared}\n",
        {"pool": "shared"},
        MultiGpuNodes.SKIP,
    ),
    (
        "    placement:\n      nodeSelector: {pool: shared}\n"
        "    nodes:\n      multiGPU: Sum\n"
        "      selector:\n        matchExpressions: [{key: vram, operator: Exists}]\n",
        {"vram": "yes"},
        MultiGpuNodes.SUM,
    ),
]


@pytest.mark.parametrize(
    ("extra", "selected", "multi_gpu"),
    NODE_POOLS,
    ids=["no pool named", "the placement's pool", "a pool of its own"],
)
def test_the_node_pool_defaults_to_where_the_placement_sends_shared_pods(
    tmp_path: Path, extra: str, selected: dict[str, str] | None, multi_gpu: MultiGpuNodes
) -> None:
    write_policy(tmp_path, HEADER + "spec:\n" + SHARING + extra)
    (policy,) = load_policy_directory(tmp_path)
    assert policy.sharing is not None
    pool = policy.sharing.nodes
    assert pool.multi_gpu is multi_gpu
    if selected is None:
        assert pool.selector is None
        return
    assert pool.selector is not None
    assert pool.selector.matches(selected)
    assert not pool.selector.matches({"pool": "whole"})


# (spec text, line of the problem, field, fragment of the message)
BAD_SPECS = [
    ("spec:\n  gpuResorces: []\n", 6, "spec.gpuResorces", "unknown field"),
    (
        "spec:\n  gpuResources:\n    - name: nvidia.com/gpu\n      fractions: Maybe\n",
        8,
        "spec.gpuResources[0].fractions",
        "'Maybe' is not one of 'Rewrite', 'Deny'",
    ),
    (
        "spec:\n  gpuResources:\n    - name: gpu\n",
        7,
        "spec.gpuResources[0].name",
        "needs a domain prefix",
    ),
    (
        "spec:\n  gpuResources:\n    - name: kubernetes.io/gpu\n",
        7,
        "spec.gpuResources[0].name",
        "kubernetes.io domain is reserved",
    ),
    (
        "spec:\n  gpuResources:\n    - name: nvidia.com/gpu\n      fractions: Rewrite\n",
        8,
        "spec.gpuResources[0].fractions",
        "Rewrite needs spec.sharing",
    ),
    (
        "spec:\n  gpuResources:\n    - name: nvidia.com/mig-*\n      fractions: Rewrite\n"
        + SHARING,
        8,
        "spec.gpuResources[0].fractions",
        "a resource family cannot be shared",
    ),
    (
        "spec:\n" + SHARING.replace("example.com/vram", "vram.kubernetes.io/mem"),
        7,
        "spec.sharing.vramResource",
        "kubernetes.io domain is reserved",
    ),
    (
        "spec:\n" + SHARING.replace("defaultModel: Tesla-T4", "defaultModel: Tesla-T9"),
        8,
        "spec.sharing.defaultModel",
        "'Tesla-T9' is not in models (Tesla-T4)",
    ),
    (
        "spec:\n" + SHARING.replace("15360", '"15360"'),
        10,
        "spec.sharing.models[0].memoryMiB",
        "must be of type integer, not string",
    ),
    (
        "spec:\n" + SHARING.replace("15360", "0"),
        10,
        "spec.sharing.models[0].memoryMiB",
        "less than the minimum of 1",
    ),
    (
        "spec:\n" + SHARING.replace("15360", "15360.0"),
        10,
        "spec.sharing.models[0].memoryMiB",
        "must be a whole number of MiB",
    ),
    (
        "spec:\n  wholeGPU:\n    nodeSelector: {1: a}\n",
        7,
        "spec.wholeGPU.nodeSelector",
        "keys must be strings",
    ),
    (
        "spec:\n  wholeGPU:\n    tolerations:\n      - {key: 'bad key!', operator: Exists}\n",
        8,
        "spec.wholeGPU.tolerations[0]",
        "key 'bad key!'",
    ),
    (
        "spec:\n" + SHARING + "    unit: KiB\n",
        11,
        "spec.sharing.unit",
        "'KiB' is not one of 'MiB', 'GiB'",
    ),
    (
        "spec:\n" + SHARING + "    env:\n      - {name: JAX_SHARE, value: '{fractoin}'}\n",
        12,
        "spec.sharing.env[0].value",
        "unknown placeholder {fractoin}",
    ),
    (
        "spec:\n" + SHARING + "    env:\n      - {name: 'BAD=NAME', value: x}\n",
        12,
        "spec.sharing.env[0].name",
        "not a valid environment variable name",
    ),
    (
        "spec:\n  wholeGPU:\n    tolerations:\n      - {key: a, operator: Exists, value: b}\n",
        8,
        "spec.wholeGPU.tolerations[0]",
        "operator Exists must not have a value",
    ),
    (
        "spec:\n  wholeGPU:\n    nodeSelector:\n      pool: 'not a label value'\n",
        8,
        "spec.wholeGPU.nodeSelector.pool",
        "not a valid label value",
    ),
    (
        "spec:\n" + SHARING + "    placement:\n      nodeSelector: {nvidia.com/gpu.product: x}\n",
        12,
        "spec.sharing.placement.nodeSelector.nvidia.com/gpu.product",
        "set from the pod's model",
    ),
    (
        "spec:\n" + SHARING + "    env:\n      - {name: A, value: x, unlessSet: [A]}\n",
        12,
        "spec.sharing.env[0].unlessSet[0]",
        "must be the name of another environment variable",
    ),
    ("spec:\n  wholeGPU: {}\n  wholeGPU: {}\n", 7, "spec.wholeGPU", "appears twice"),
    (
        "spec:\n  match:\n    namespaces: [ml-*, 'Team_A']\n",
        7,
        "spec.match.namespaces[1]",
        "neither a namespace name nor a glob",
    ),
    (
        "spec:\n  match:\n    namespaceSelector:\n      matchExpressions:\n"
        "        - {key: tier, operator: In}\n",
        9,
        "spec.match.namespaceSelector.matchExpressions[0].values",
        "operator In needs values",
    ),
    (
        "spec:\n  match:\n    objectSelector:\n      matchExpressions:\n"
        "        - {key: tier, operator: Exists, values: [a]}\n",
        9,
        "spec.match.objectSelector.matchExpressions[0].values",
        "operator Exists takes no values",
    ),
    (
        "spec:\n  match:\n    namespaceSelector:\n      matchLabels: {tier: gold}\n"
        "      matchExpressions:\n        - {key: tier, operator: NotIn, values: [gold]}\n",
        8,
        "spec.match.namespaceSelector",
        "contradict each other: it matches nothing",
    ),
    (
        "spec:\n  match:\n    objectSelector:\n      matchLabels: {'bad key!': x}\n",
        8,
        "spec.match.objectSelector.matchLabels.bad key!",
        "label key 'bad key!'",
    ),
    (
        "spec:\n  match:\n    namespaceSelector:\n      matchOperators: []\n",
        8,
        "spec.match.namespaceSelector.matchOperators",
        "unknown field",
    ),
    (
        "spec:\n  match:\n    namespaces: [ml-*]\n  exclude:\n    namespaces: ['*']\n",
        9,
        "spec.exclude",
        "leaves out everything spec.match selects",
    ),
    ("spec:\n  exclude: {}\n", 6, "spec.exclude", "should be non-empty"),
    ("spec:\n  priority: high\n", 6, "spec.priority", "must be of type integer"),
    (
        "spec:\n" + SHARING + "    runtimeClassName: NVIDIA_runtime\n",
        11,
        "spec.sharing.runtimeClassName",
        "'NVIDIA_runtime' is not a RuntimeClass name: a DNS subdomain",
    ),
    (
        "spec:\n" + SHARING + "    runtimeClassName: ''\n",
        11,
        "spec.sharing.runtimeClassName",
        "must not be empty",
    ),
    (
        "spec:\n" + SHARING + "    runtimeClassName: [nvidia]\n",
        11,
        "spec.sharing.runtimeClassName",
        "must be of type string, not array",
    ),
    (
        "spec:\n" + SHARING + "    nodes:\n      multiGPU: All\n",
        12,
        "spec.sharing.nodes.multiGPU",
        "'All' is not one of 'Skip', 'Sum'",
    ),
    (
        "spec:\n" + SHARING + "    nodes:\n      selector:\n        matchLabels: {pool: 'a b'}\n",
        13,
        "spec.sharing.nodes.selector.matchLabels.pool",
        "'a b' is not a valid label value",
    ),
]


@pytest.mark.parametrize(
    ("spec", "line", "field", "fragment"), BAD_SPECS, ids=[case[3] for case in BAD_SPECS]
)
def test_a_bad_policy_is_reported_with_file_line_and_field(
    tmp_path: Path, spec: str, line: int, field: str, fragment: str
) -> None:
    path = write_policy(tmp_path, HEADER + spec)
    problems = load_problems(tmp_path)
    assert any(
        problem.startswith(f"{path}:{line}: {field}: ") and fragment in problem
        for problem in problems
    ), problems


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (HEADER.replace("GPUPolicy", "GpuPolicy") + "spec: {}\n", "kind: must be 'GPUPolicy'"),
        (HEADER.replace("v1alpha1", "v1") + "spec: {}\n", "apiVersion: must be"),
        (HEADER, "spec: is required"),
        (HEADER + "spec: {}\n  bad: [\n", "invalid YAML"),
        (HEADER.replace("name: team", "name: Team_1") + "spec: {}\n", "metadata.name"),
    ],
)
def test_documents_that_are_not_policies(tmp_path: Path, text: str, fragment: str) -> None:
    write_policy(tmp_path, text)
    problems = load_problems(tmp_path)
    assert any(fragment in problem for problem in problems), problems


def test_every_problem_is_reported_not_only_the_first(tmp_path: Path) -> None:
    write_policy(tmp_path, HEADER + "spec:\n  gpuResources:\n    - name: gpu\n    - name: x/y z\n")
    write_policy(tmp_path, HEADER.replace("team", "other") + "spec: {unknown: 1}\n", "b.yaml")
    problems = load_problems(tmp_path)
    assert len(problems) == 3, problems


def test_two_policies_with_one_name_are_refused(tmp_path: Path) -> None:
    write_policy(tmp_path, HEADER + "spec: {}\n", "a.yaml")
    write_policy(tmp_path, HEADER + "spec: {}\n", "b.yaml")
    problems = load_problems(tmp_path)
    assert any("policy 'team' is already defined in" in problem for problem in problems)


def test_an_empty_directory_is_an_error(tmp_path: Path) -> None:
    write_policy(tmp_path, "# nothing yet\n", "README.yaml")
    assert load_problems(tmp_path) == [f"{tmp_path}: (directory): holds no policy documents"]


def test_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    assert "not a directory" in load_problems(tmp_path / "absent")[0]


def test_configmap_mount_layout_is_read_through_its_links(tmp_path: Path) -> None:
    data = tmp_path / "..2026_11_22_08_00_00.000000001"
    data.mkdir()
    write_policy(data, HEADER + "spec: {}\n", "team.yaml")
    (tmp_path / "..data").symlink_to(data.name)
    (tmp_path / "team.yaml").symlink_to(Path("..data") / "team.yaml")
    (policy,) = load_policy_directory(tmp_path)
    assert policy.name == "team"


def test_the_built_in_policy_name_is_reserved(tmp_path: Path) -> None:
    write_policy(tmp_path, HEADER.replace("name: team", "name: built-in") + "spec: {}\n")
    problems = load_problems(tmp_path)
    assert any("metadata.name: 'built-in' is reserved" in problem for problem in problems)


def policy_text(name: str, spec: str) -> str:
    return HEADER.replace("name: team", f"name: {name}") + "spec:\n" + spec


# Two policies at one priority: (spec of a, spec of b, whether they could govern one object)
PAIRS = [
    ("  {}\n", "  {}\n", True),
    ("  match: {namespaces: [ml]}\n", "  match: {namespaces: [web]}\n", False),
    ("  match: {namespaces: [ml]}\n", "  match: {namespaces: [ml, web]}\n", True),
    ("  match: {namespaces: [ml-*]}\n", "  match: {namespaces: [ml-team]}\n", True),
    ("  match: {namespaces: [ml-*]}\n", "  match: {namespaces: ['*-prod']}\n", True),
    ("  match: {namespaces: [ml-*]}\n", "  match: {namespaces: [web-*]}\n", False),
    ("  match: {namespaces: [kube-system]}\n", "  {}\n", False),
    ("  match: {namespaces: [kube-system]}\n", "  match: {namespaces: [kube-*]}\n", False),
    (
        "  match: {namespaceSelector: {matchLabels: {gpu-sharing: enabled}}}\n",
        "  match: {namespaceSelector: {matchLabels: {gpu-sharing: disabled}}}\n",
        False,
    ),
    (
        "  match: {namespaceSelector: {matchLabels: {gpu-sharing: enabled}}}\n",
        "  match: {namespaceSelector: {matchLabels: {env: prod}}}\n",
        True,
    ),
    (
        "  match: {namespaceSelector: {matchExpressions: [{key: env, operator: Exists}]}}\n",
        "  match: {namespaceSelector: {matchExpressions: [{key: env, operator: DoesNotExist}]}}\n",
        False,
    ),
    (
        "  match: {objectSelector: {matchExpressions: [{key: t, operator: NotIn, values: [a]}]}}\n",
        "  match: {objectSelector: {matchExpressions: [{key: t, operator: In, values: [a, b]}]}}\n",
        True,
    ),
    (
        "  match: {namespaces: [ml]}\n",
        "  match: {namespaces: [web], objectSelector: {matchLabels: {a: b}}}\n",
        False,
    ),
    # an exclusion that covers the other's whole match keeps them apart
    (
        "  exclude: {namespaces: [prod-*]}\n",
        "  match: {namespaces: [prod-*]}\n",
        False,
    ),
    (
        "  exclude: {namespaceSelector: {matchLabels: {env: prod}}}\n",
        "  match:\n    namespaceSelector: {matchLabels: {env: prod, tier: gold}}\n",
        False,
    ),
    # one that covers only part of it does not
    (
        "  exclude: {namespaces: [prod-a]}\n",
        "  match: {namespaces: [prod-*]}\n",
        True,
    ),
]


@pytest.mark.parametrize(("a", "b", "overlap"), PAIRS)
def test_policies_of_one_priority_must_not_overlap(
    tmp_path: Path, a: str, b: str, overlap: bool
) -> None:
    write_policy(tmp_path, policy_text("alpha", a), "a.yaml")
    write_policy(tmp_path, policy_text("beta", b), "b.yaml")
    if not overlap:
        assert len(PolicySet.load(tmp_path).policies) == 2
        return
    (problem,) = load_problems(tmp_path)
    assert problem.startswith(f"{tmp_path / 'b.yaml'}:4: spec.match: policy 'beta' ")
    assert f"as policy 'alpha' ({tmp_path / 'a.yaml'}:4) at the same priority 0" in problem


def test_a_priority_settles_an_overlap(tmp_path: Path) -> None:
    write_policy(tmp_path, policy_text("alpha", "  {}\n"), "a.yaml")
    write_policy(tmp_path, policy_text("beta", "  priority: 10\n"), "b.yaml")
    assert {policy.name for policy in PolicySet.load(tmp_path).policies} == {"alpha", "beta"}


def test_overlaps_are_reported_whatever_the_file_order(tmp_path: Path) -> None:
    write_policy(tmp_path, policy_text("alpha", "  {}\n"), "z.yaml")
    write_policy(tmp_path, policy_text("beta", "  {}\n"), "a.yaml")
    (problem,) = load_problems(tmp_path)
    assert "'alpha'" in problem and "'beta'" in problem


def test_a_yaml_syntax_error_names_the_character_and_its_line(tmp_path: Path) -> None:
    path = write_policy(tmp_path, HEADER + "spec:\n\tpriority: 1\n")
    problems = load_problems(tmp_path)
    header_lines = HEADER.count("\n")
    assert any(
        problem.startswith(f"{path}:{header_lines + 2}: (yaml): invalid YAML")
        and "'\\t'" in problem
        for problem in problems
    ), problems


LINT_A = """apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: a}
spec:
  gpuResources: [{name: nvidia.com/gpu, fractions: Rewrite}]
  sharing:
    vramResource: example.com/vram
    unit: KiB
    defaultModel: Nope
"""
LINT_B = """apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: b}
spec:
  match: {namespaces: [team-*]}
---
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: c}
spec:
  match: {namespaces: [team-a]}
"""


def test_one_load_names_every_problem_of_the_directory_in_file_and_line_order(
    tmp_path: Path,
) -> None:
    write_policy(tmp_path, LINT_A, "a.yaml")
    write_policy(tmp_path, LINT_B, "b.yaml")
    write_policy(tmp_path, "a: [\n", "c.yaml")
    problems = load_problems(tmp_path)
    where = [problem.split(": ", 2)[:2] for problem in problems]
    assert [w[0].rsplit("/", 1)[1] for w in where] == [
        "a.yaml:8",
        "a.yaml:9",
        "b.yaml:9",
        "c.yaml:2",
    ]
    # The schema's fault does not hide the check it cannot make, nor a broken file the overlap.
    assert "'Nope' is not in models (Tesla-T4, NVIDIA-A10," in problems[1]
    assert "policy 'c' could govern the same objects as policy 'b'" in problems[2]
