"""The gate every pod passes: `asks_for` reads the raw spec, before any view of the pod is
built, so a pod it lets go must be one that the full reading would accept and find no GPU in."""

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.support.generated_pods import POD, REPO_POLICIES, pods
from webhook.engine.gpu_requests import asks_for
from webhook.engine.pod_spec import MalformedObject, PodView, pod_parts
from webhook.policy.defaults import FRACTION_ANNOTATION
from webhook.policy.policy_set import RESOURCE_VERDICT_ENTRIES, PolicySet

POLICIES = PolicySet.load(REPO_POLICIES)
WRONG_TYPES = st.sampled_from([None, "x", 0, 1.5, True, [], {}, [{}]])
# Where a pod can be damaged: the field's parent, found from the pod, and the field's key.
DAMAGE_SITES = st.sampled_from(
    [
        (("metadata",), "annotations"),
        (("spec",), "containers"),
        (("spec",), "initContainers"),
        (("spec", "containers"), 0),
        (("spec", "containers", 0), "name"),
        (("spec", "containers", 0), "resources"),
        (("spec", "containers", 0, "resources"), "limits"),
        (("spec", "containers", 0, "resources"), "requests"),
    ]
)


def _damaged(
    pod: dict[str, Any], site: tuple[tuple[str | int, ...], str | int], value: Any
) -> dict[str, Any]:
    damaged = copy.deepcopy(pod)
    parent: Any = damaged
    for key in site[0]:
        if isinstance(parent, dict):
            parent = parent.setdefault(key, {})
        elif isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            parent = parent[key]
        else:
            return damaged
    if isinstance(parent, dict) or (isinstance(parent, list) and site[1] == 0 and parent):
        parent[site[1]] = value
    return damaged


def _view_asks_for(view: PodView) -> bool:
    """The same question asked of the checked view, the slow way."""
    return FRACTION_ANNOTATION in view.annotations or any(
        POLICIES.is_gpu_resource(name)
        for container in view.containers
        for name in (*container.limits, *container.requests)
    )


@given(pods(), st.lists(st.tuples(DAMAGE_SITES, WRONG_TYPES), max_size=2))
def test_a_pod_let_go_reads_cleanly_and_asks_for_no_gpu(
    pod: dict[str, Any], damage: list[tuple[Any, Any]]
) -> None:
    for site, value in damage:
        pod = _damaged(pod, site, value)
    try:
        _, annotations, spec, _ = pod_parts(pod, POD)
        view = PodView.read(pod, POD)
    except MalformedObject:
        try:
            _, annotations, spec, _ = pod_parts(pod, POD)
        except MalformedObject:
            return  # refused before the gate, as before
        assert asks_for(annotations, spec, POLICIES.is_gpu_resource)
        return
    gate = asks_for(annotations, spec, POLICIES.is_gpu_resource)
    # Never lets a GPU pod go; an undamaged pod gets the very answer of the checked view (a
    # damaged one that still reads, with an explicit null, may go the long way round).
    assert gate or not _view_asks_for(view)
    if not damage:
        assert gate == _view_asks_for(view)


def test_resource_verdicts_beyond_the_remembered_ones_are_still_right() -> None:
    names = [f"example.com/thing-{i}" for i in range(RESOURCE_VERDICT_ENTRIES + 10)]
    assert not any(POLICIES.is_gpu_resource(name) for name in names)
    assert POLICIES.is_gpu_resource("nvidia.com/gpu")
    assert POLICIES.is_gpu_resource("nvidia.com/mig-1g.5gb")
    assert not POLICIES.is_gpu_resource("cpu")
