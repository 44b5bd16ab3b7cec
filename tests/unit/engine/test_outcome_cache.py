"""The outcome cache gives what the engine gives: pods that differ only where the engine does
not read share one outcome, pods that differ where it reads do not, and a reloaded policy
never reuses an older one's outcome."""

import contextlib
import copy
import datetime
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.generated_pods import POD, POLICY, pods
from tests.support.server import REPO_ROOT
from tests.unit.engine import builders
from webhook.admission.decide import decide
from webhook.admission.review import decode_envelope, read_request
from webhook.bounded_cache import BoundedCache
from webhook.cli.scenario_folders import is_scenario_folder, load_scenario
from webhook.engine.evaluate import evaluate_pod
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.outcome_cache import ENTRY_OVERHEAD_BYTES, OutcomeCache
from webhook.engine.pod_spec import MalformedObject, engine_input, pod_parts
from webhook.engine.workloads import PodTemplateLocation, pod_template_location
from webhook.policy.loader import load_policy_directory
from webhook.policy.policy_set import PolicySet

SCENARIOS = REPO_ROOT / "tests" / "scenarios"
SHIPPED = SCENARIOS / "shipped"
REPO_POLICIES = REPO_ROOT / "policies"


def fresh(obj: dict[str, Any], policy: Any = POLICY, mode: Any = "mutate") -> Any:
    return replace(evaluate_pod(obj, POD, policy, mode), document=None)


# Fields the engine never reads, each with a value that differs from pod to pod in a cluster.
def _elsewhere(pod: dict[str, Any], index: int) -> None:
    pod["metadata"]["name"] = f"serve-7d9f-{index}"
    pod["metadata"]["uid"] = f"uid-{index}"
    pod["metadata"].setdefault("labels", {})["pod-template-hash"] = str(index)
    spec = pod["spec"]
    spec["volumes"] = [{"name": f"kube-api-access-{index}", "projected": {"sources": []}}]
    spec["serviceAccountName"] = f"sa-{index}"
    for container in spec["containers"]:
        container["image"] = f"cuda:12.{index}"
        container["volumeMounts"] = [{"name": f"kube-api-access-{index}", "mountPath": "/v"}]
        container["ports"] = [{"containerPort": 8000 + index}]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(pods(), st.sampled_from(["mutate", "validate"]))
def test_evaluate_gives_the_engines_outcome_and_serves_pods_that_differ_elsewhere(
    pod: dict[str, Any], mode: Any
) -> None:
    cache = OutcomeCache()
    first = cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, mode)
    assert first == fresh(pod, mode=mode)
    sibling = copy.deepcopy(pod)
    _elsewhere(sibling, 7)
    assert fresh(sibling, mode=mode) == first
    assert cache.evaluate(sibling, POD, pod_parts(sibling, POD), POLICY, mode) is first
    assert len(cache) == 1


def test_pods_that_differ_where_the_engine_reads_get_their_own_outcomes() -> None:
    base: dict[str, Any] = {
        "metadata": {"name": "a"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    }
    variants = [copy.deepcopy(base) for _ in range(10)]
    variants[1]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    variants[2]["spec"]["containers"][0]["name"] = "d"
    variants[3]["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    variants[4]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "Tesla-T4"}
    variants[5]["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    variants[6]["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    variants[7]["spec"]["runtimeClassName"] = "nvidia"
    variants[8]["spec"]["nodeName"] = "gpu-7"
    variants[9]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    cache = OutcomeCache()
    keys = {engine_input(POD, pod_parts(pod, POD)) for pod in variants}
    assert len(keys) == len(variants)
    for pod in variants:
        assert cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate") == fresh(pod)
    assert len(cache) == len(variants)


class _NotedReads(dict[str, Any]):
    """A pod's metadata or spec that notes each key looked up in it, as `<prefix><key>`. A
    shallow copy (the patch recorder copies on write) notes into the same set."""

    into: set[str]
    prefix: str

    def get(self, key: str, default: Any = None) -> Any:
        self.into.add(self.prefix + key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.into.add(self.prefix + key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.into.add(self.prefix + str(key))
        return super().__contains__(key)


def _noting(obj: Any, location: PodTemplateLocation, into: set[str]) -> dict[str, Any]:
    """A copy of `obj` whose pod metadata and spec (and a workload's own metadata) note the
    keys read in them into `into`."""
    copied = copy.deepcopy(obj)
    parts = [(location.metadata, "metadata."), (location.spec, "spec.")]
    if not location.is_pod:
        parts.append((("metadata",), "object.metadata."))  # the workload's own
    for path, prefix in parts:
        node: Any = copied
        for part in path[:-1]:
            node = node.setdefault(part, {})
        part = node.get(path[-1])
        if isinstance(part, dict):
            noting = _NotedReads(part)
            noting.into, noting.prefix = into, prefix
            node[path[-1]] = noting
    return copied


def _scenario_objects() -> list[tuple[str, Any, PodTemplateLocation, Path]]:
    """Every object the scenarios send, and every object they expect /mutate to give (the
    input of a second pass), with the policies each runs against."""
    found = []
    for folder in sorted(SCENARIOS.glob("*/*")):
        if not is_scenario_folder(folder):
            continue
        case = load_scenario(folder, SCENARIOS, REPO_ROOT / "policies")
        request = case.review["request"]
        location = pod_template_location(request["kind"]["group"], request["kind"]["kind"])
        if location is None or not isinstance(request.get("object"), dict):
            continue
        for obj in (request["object"], case.expect.mutated):
            if isinstance(obj, dict):
                found.append((case.id, obj, location, REPO_ROOT / case.policies))
    return found


def test_every_part_of_a_pod_the_engine_reads_is_in_the_outcome_key() -> None:
    """The key is what `engine_input` reads; the engine reads through `PodView` and writes
    through the patch recorder, which reads what it replaces. Every scenario object is judged
    under every policy of its folder, in both modes, through metadata and a spec that note
    each key read: a reader of a new field fails here until `engine_input` keys it too."""
    policies: dict[Path, Any] = {}
    read_by_engine: dict[str, str] = {}
    read_for_key: set[str] = set()
    objects = _scenario_objects()
    assert len(objects) > 100
    for case_id, obj, location, directory in objects:
        if directory not in policies:
            policies[directory] = load_policy_directory(directory)
        for policy in policies[directory]:
            for mode in ("mutate", "validate"):
                noted: set[str] = set()
                with contextlib.suppress(MalformedObject):
                    evaluate_pod(_noting(obj, location, noted), location, policy, mode)
                for key in noted:
                    read_by_engine.setdefault(key, case_id)
        for policy in policies[directory]:
            gives_labels = policy.sharing is not None and policy.sharing.gives_labels
            keyed = _noting(obj, location, read_for_key)
            engine_input(location, pod_parts(keyed, location), gives_labels)
    # The scenarios reach every reader there is: a share reads the runtimeClassName.
    assert {"spec.nodeSelector", "spec.affinity", "spec.runtimeClassName"} <= set(read_by_engine)
    missing = {key: case for key, case in read_by_engine.items() if key not in read_for_key}
    assert not missing, f"read by the engine but not in engine_input (key: a scenario): {missing}"


def test_absent_null_and_empty_parts_are_different_pods() -> None:
    # The patch for each differs: an absent map is added whole, a null one replaced, an
    # empty one added into. One outcome for all would patch through a map that is not there.
    gpu = {"limits": {"nvidia.com/gpu": "0.5"}}
    shapes = [
        {"metadata": {}, "resources": gpu},
        {"metadata": {"annotations": None}, "resources": gpu},
        {"metadata": {"annotations": {}}, "resources": gpu},
        {"metadata": {}, "resources": {**gpu, "requests": {}}},
        {"metadata": {}, "resources": {**gpu, "requests": None}},
        {"metadata": {}, "resources": gpu, "spec": {"nodeSelector": None}},
        {"metadata": {}, "resources": gpu, "spec": {"tolerations": None}},
        {"metadata": {}, "resources": gpu, "spec": {"affinity": None}},
        {"metadata": {}, "resources": gpu, "container": {"env": None}},
        # No resources, or null ones: the pod asks by the fraction annotation.
        {"metadata": {"annotations": {"gpu-fraction": "0.5"}}},
        {"metadata": {"annotations": {"gpu-fraction": "0.5"}}, "resources": None},
    ]
    cache = OutcomeCache()
    for shape in shapes:
        resources = {"resources": shape["resources"]} if "resources" in shape else {}
        pod = {
            "metadata": {"name": "a", **shape["metadata"]},
            "spec": {
                "containers": [{"name": "c", **resources, **shape.get("container", {})}],
                **shape.get("spec", {}),
            },
        }
        outcome = cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")
        assert outcome == fresh(pod)
        jsonpatch.apply_patch(pod, outcome.operations)
    assert len(cache) == len(shapes)


def test_a_reloaded_policy_does_not_reuse_the_outcomes_of_the_one_it_replaced() -> None:
    pod = _gpu_pod()
    reloaded = load_policy_directory(REPO_POLICIES)[0]
    assert reloaded == POLICY and reloaded is not POLICY
    cache = OutcomeCache()
    first = cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")
    again = cache.evaluate(pod, POD, pod_parts(pod, POD), reloaded, "mutate")
    assert again == first and again is not first


def test_a_pod_with_a_value_json_cannot_hold_is_judged_without_the_cache() -> None:
    pod = _gpu_pod()
    # A manifest read from YAML may hold a date where the API would hold a string.
    pod["metadata"]["annotations"] = {"released": datetime.date(2026, 1, 1)}
    assert engine_input(POD, pod_parts(pod, POD)) is None
    cache = OutcomeCache()
    assert cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate") == fresh(pod)
    assert len(cache) == 0


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": {"name": "c"}},
        {"containers": ["c"]},
        {"containers": [{"name": 7, "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        {"containers": [{"name": "c", "resources": {"limits": ["nvidia.com/gpu"]}}]},
        {"containers": [{"name": "c", "resources": "1 GPU"}]},
    ],
    ids=["containers-object", "container-string", "name-number", "limits-list", "resources-text"],
)
def test_a_pod_that_cannot_be_read_is_refused_every_time_and_never_kept(
    spec: dict[str, Any],
) -> None:
    pod = {"metadata": {"name": "p", "annotations": {"gpu-fraction": "0.5"}}, "spec": spec}
    cache = OutcomeCache()
    problems = []
    for _ in range(2):
        with pytest.raises(MalformedObject) as refused:
            cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")
        problems.append(str(refused.value))
    assert problems[0] == problems[1] and "spec.containers" in problems[0]
    assert len(cache) == 0


def _sibling_without(key: str) -> dict[str, Any]:
    """A GPU pod without the part: one without resources asks by the fraction annotation."""
    if key != "resources":
        return _gpu_pod()
    return {
        "metadata": {"name": "p", "annotations": {"gpu-fraction": "0.5"}},
        "spec": {"containers": [{"name": "c"}]},
    }


def _with_part(pod: dict[str, Any], where: tuple[str | int, ...], key: str, value: Any) -> Any:
    changed = copy.deepcopy(pod)
    node: Any = changed
    for step in where:
        node = node[step]
    node[key] = value
    return changed


@pytest.mark.parametrize(
    ("where", "key"),
    [
        (("spec", "containers", 0), "resources"),
        (("spec", "containers", 0), "env"),
        (("spec",), "nodeSelector"),
        (("spec",), "tolerations"),
        (("spec",), "affinity"),
    ],
)
@pytest.mark.parametrize("value", [0, ""])
def test_a_part_of_the_wrong_type_is_refused_after_a_sibling_that_left_it_out(
    where: tuple[str | int, ...], key: str, value: Any
) -> None:
    sibling = _sibling_without(key)
    pod = _with_part(sibling, where, key, value)
    cache = OutcomeCache()
    cache.evaluate(sibling, POD, pod_parts(sibling, POD), POLICY, "mutate")
    with pytest.raises(MalformedObject):
        cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")


def test_the_cache_keeps_at_most_its_size_and_forgets_the_oldest_first() -> None:
    owner = object()
    cache: BoundedCache[int, str] = BoundedCache(3)
    for key in range(5):
        cache.put(owner, key, str(key))
    assert len(cache) == 3
    assert [cache.get(owner, key) for key in range(5)] == [None, None, "2", "3", "4"]


def test_a_value_serves_only_the_very_object_it_was_derived_from() -> None:
    cache: BoundedCache[str, str] = BoundedCache(3)
    first = [1]
    cache.put(first, "k", "of the first")
    assert cache.get(first, "k") == "of the first"
    assert cache.get([1], "k") is None  # equal, but another object
    assert cache.get(first, "other") is None


def test_every_shipped_review_gets_the_same_answer_the_second_time() -> None:
    policies = PolicySet.load(REPO_POLICIES)
    for folder in sorted(SHIPPED.iterdir()):
        envelope = decode_envelope((folder / "review.json").read_bytes())
        if envelope.too_deep:
            continue  # refused before anything is decided
        request = read_request(envelope)
        first = decide(request, policies, "mutate")
        second = decide(copy.deepcopy(request), policies, "mutate")
        assert second == first, folder.name


def test_a_denial_from_a_reused_outcome_names_the_pod_it_answers() -> None:
    policies = PolicySet.load(REPO_POLICIES)
    review = (SHIPPED / "10-create-pod-bad-req-ne-lim" / "review.json").read_bytes()
    messages = []
    for name in ("first-pod", "second-pod"):
        request = read_request(decode_envelope(review))
        request.name = name
        verdict = decide(request, policies, "mutate")
        assert not verdict.allowed
        messages.append(verdict.message)
    assert messages[0].startswith('Pod "first-pod"')
    assert messages[1].startswith('Pod "second-pod"')


def test_a_template_and_a_pod_with_the_same_spec_get_their_own_patches() -> None:
    pod = _gpu_pod()
    deployment = {"spec": {"template": {"metadata": {}, "spec": copy.deepcopy(pod["spec"])}}}
    location = pod_template_location("apps", "Deployment")
    assert location is not None
    cache = OutcomeCache()
    for obj, where in ((pod, POD), (deployment, location)):
        outcome = cache.evaluate(obj, where, pod_parts(obj, where), POLICY, "mutate")
        paths = {operation["path"] for operation in outcome.operations}
        prefix = "/spec/template/spec/" if where is location else "/spec/containers/"
        assert paths and any(path.startswith(prefix) for path in paths), paths


def _gpu_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "250m"}}}]
        },
    }


def test_outcome_cache_weight_grows_with_what_it_keeps() -> None:
    cache = OutcomeCache()
    assert cache.weight == 0
    weights = []
    for gpus in ("1", "2"):
        pod = {
            "metadata": {"name": "a"},
            "spec": {
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]
            },
        }
        cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")
        weights.append(cache.weight)
    assert 0 < weights[0] < weights[1]


def test_evaluate_keys_the_inventory_version_so_a_newer_snapshot_judges_the_pod_afresh() -> None:
    rules = builders.policy(builders.sharing(every_model=True))
    pod = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}],
            "nodeSelector": {builders.MODEL_LABEL: "Custom-GPU"},
        },
    }
    cache = OutcomeCache()
    unread = cache.evaluate(pod, POD, pod_parts(pod, POD), rules, "mutate", NO_INVENTORY)
    assert [v.rule for v in unread.violations] == ["model-unknown"]
    inventory = MigInventory(version=1, memory_by_product={"Custom-GPU": 24000})
    read = cache.evaluate(pod, POD, pod_parts(pod, POD), rules, "mutate", inventory)
    assert (read.violations, read.model) == ((), "Custom-GPU")


def test_evaluate_keys_absent_metadata_apart_from_null_metadata() -> None:
    absent = {"spec": _gpu_pod()["spec"]}
    null = {"metadata": None, "spec": _gpu_pod()["spec"]}
    cache = OutcomeCache()
    ops = []
    for pod in (absent, null):
        outcome = cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")
        ops += [op["op"] for op in outcome.operations if op["path"] == "/metadata"]
    assert ops == ["add", "replace"]


def test_outcome_cache_weight_is_twice_the_key_text_with_the_overhead_and_what_is_kept() -> None:
    pod = _gpu_pod()
    cache = OutcomeCache()
    outcome = cache.evaluate(pod, POD, pod_parts(pod, POD), POLICY, "mutate")
    gives_labels = POLICY.sharing is not None and POLICY.sharing.gives_labels
    text = engine_input(POD, pod_parts(pod, POD), gives_labels)
    assert text is not None and outcome.operations
    assert cache.weight == (
        2 * len(text)
        + ENTRY_OVERHEAD_BYTES
        + sum(len(repr(operation)) for operation in outcome.operations)
        + sum(len(message) for message in outcome.warnings)
        + sum(len(repr(companion)) for companion in outcome.companions)
        + sum(len(violation.message) for violation in outcome.violations)
    )
