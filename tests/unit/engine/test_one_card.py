"""A pod whose shares must share one card is refused when they can never fit it, counted as the
scheduler counts a pod: main containers with the sidecars beside them, or one init container
at a time with the sidecars started before it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.engine_objects import mutated
from tests.support.generated_pods import POD, POLICY
from webhook.engine.evaluate import evaluate_pod


def container(name: str, gpu: str | None, *, sidecar: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "image": "cuda:12"}
    if gpu is not None:
        spec["resources"] = {"limits": {"nvidia.com/gpu": gpu}}
    if sidecar:
        spec["restartPolicy"] = "Always"
    return spec


def pod_of(containers: list[Any], init: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


# The shipped policy's default model is a Tesla-T4 (15360 MiB) on one-card nodes.
@pytest.mark.parametrize(
    ("obj", "held"),
    [
        pytest.param(
            pod_of([container(f"c{i}", "0.3") for i in range(4)]),
            '18432 MiB at once (container "c0" 4608 + container "c1" 4608 + '
            'container "c2" 4608 + container "c3" 4608)',
            id="four containers at 0.3",
        ),
        pytest.param(
            pod_of([container("main", "0.5")], [container("proxy", "0.6", sidecar=True)]),
            "16896 MiB at once",
            id="a sidecar runs beside the main container",
        ),
        pytest.param(
            pod_of(
                [container("main", "0.1")],
                [container("proxy", "0.5", sidecar=True), container("warmup", "0.6")],
            ),
            '16896 MiB at once (init container "proxy" 7680 + init container "warmup" 9216)',
            id="an init container runs beside the sidecars started before it",
        ),
    ],
)
def test_over_one_card_refuses_the_shares_held_at_once_that_never_fit_with_the_sum(
    obj: dict[str, Any], held: str
) -> None:
    outcome = evaluate_pod(obj, POD, POLICY, "mutate")
    (violation,) = outcome.violations
    assert violation.rule == "shares-exceed-card"
    assert held in violation.message
    assert "more than a Tesla-T4 has (15360 MiB)" in violation.message


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(pod_of([container("a", "0.5"), container("b", "0.5")]), id="two halves"),
        pytest.param(
            pod_of([container("main", "0.5")], [container("warmup", "0.9")]),
            id="an init container ends before the main one starts",
        ),
        pytest.param(
            pod_of(
                [container("main", "0.4")],
                [container("warmup", "0.4"), container("proxy", "0.5", sidecar=True)],
            ),
            id="a sidecar started after an init container does not run beside it",
        ),
    ],
)
def test_over_one_card_admits_shares_held_at_once_that_fit_at_every_moment(
    obj: dict[str, Any],
) -> None:
    mutated(obj, POD, POLICY)


def test_held_at_once_counts_the_running_containers_where_an_init_container_holds_as_much() -> None:
    obj = pod_of(
        [container("a", "0.3"), container("b", "0.3")],
        [container("proxy", "0.5", sidecar=True), container("warmup", "0.6")],
    )
    (violation,) = evaluate_pod(obj, POD, POLICY, "mutate").violations
    assert (
        '16896 MiB at once (init container "proxy" 7680 + container "a" 4608 + container "b" 4608)'
    ) in violation.message
