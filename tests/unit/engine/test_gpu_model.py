"""gpu_model.py: which GPU model a pod's share is measured against, and whether the pod must
be pinned to it; what a pod names on the model label, for policy selection."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.engine.builders import (
    A100,
    DEPLOYMENT,
    H200,
    MODEL_LABEL,
    POD,
    T4,
    container,
    deployment,
    pod,
    sharing,
    view,
)
from webhook.engine.findings import Violation
from webhook.engine.gpu_model import (
    ANY_OTHER_MODEL,
    ModelChoice,
    choose_model,
    models_named_in,
    named_models,
    owns_pin,
)
from webhook.engine.inventory import NO_INVENTORY, MigInventory
from webhook.engine.pod_spec import MalformedObject, pod_parts
from webhook.engine.share_record import NO_RECORD, ShareRecord
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.model import GpuModel, Sharing

KNOWN = "known: Tesla-T4, NVIDIA-A100-SXM4-40GB, NVIDIA-H200"
BY_DEFAULT = 'the default model of policy "pool"'
BY_POD = "nvidia.com/gpu.product selected by the pod"
SIZED_FOR = "the model it was sized for"
WITH_ALIASES = sharing(
    models={"Tesla-T4": T4, "Tesla-T4-SHARED": T4, "NVIDIA-H200": H200, "NVIDIA-H200-SHARED": H200}
)
EVERY_MODEL = sharing(every_model=True)
CUSTOM = MigInventory(version=1, memory_by_product={"Custom-GPU": 24000})


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    """A required node affinity of these terms, each a list of match expressions."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": list(term)} for term in terms]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector}}


def on(operator: str, *values: str, key: str = MODEL_LABEL) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


def selecting(
    model: str | None = None, affinity: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = dict(fields)
    if model is not None:
        spec["nodeSelector"] = {MODEL_LABEL: model}
    if affinity is not None:
        spec["affinity"] = affinity
    return pod(container("c"), **spec)


def record_of(model: str, pinned: bool) -> ShareRecord:
    return ShareRecord(model, pinned, {})


# choose_model -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "pool", "record", "inventory", "choice"),
    [
        (selecting(), sharing(), NO_RECORD, NO_INVENTORY, ModelChoice(T4, True, BY_DEFAULT)),
        (
            selecting(),
            sharing(single_model_pool=True),
            NO_RECORD,
            NO_INVENTORY,
            ModelChoice(T4, False, BY_DEFAULT),
        ),
        (
            selecting(A100.product),
            sharing(),
            NO_RECORD,
            NO_INVENTORY,
            ModelChoice(A100, False, BY_POD),
        ),
        (
            selecting("NVIDIA-H200-SHARED"),
            WITH_ALIASES,
            NO_RECORD,
            NO_INVENTORY,
            ModelChoice(H200, False, BY_POD),
        ),
        (
            selecting(affinity=required([on("In", "Tesla-T4", "Tesla-T4-SHARED")])),
            WITH_ALIASES,
            NO_RECORD,
            NO_INVENTORY,
            ModelChoice(T4, False, BY_POD),
        ),
        (
            selecting(affinity=required([on("In", T4.product, A100.product)])),
            sharing(),
            NO_RECORD,
            NO_INVENTORY,
            ModelChoice(T4, True, BY_DEFAULT),
        ),
        (
            selecting("Custom-GPU"),
            EVERY_MODEL,
            NO_RECORD,
            CUSTOM,
            ModelChoice(GpuModel("Custom-GPU", 24000), False, BY_POD),
        ),
        (
            selecting(),
            sharing(),
            record_of(A100.product, True),
            NO_INVENTORY,
            ModelChoice(A100, True, SIZED_FOR),
        ),
        (
            selecting(A100.product),
            sharing(),
            record_of(A100.product, True),
            NO_INVENTORY,
            ModelChoice(A100, True, SIZED_FOR),
        ),
        (
            selecting(A100.product),
            sharing(),
            record_of(A100.product, False),
            NO_INVENTORY,
            ModelChoice(A100, False, BY_POD),
        ),
        (
            selecting(),
            sharing(),
            record_of("Retired-GPU", True),
            NO_INVENTORY,
            ModelChoice(T4, True, BY_DEFAULT),
        ),
        (
            selecting(),
            EVERY_MODEL,
            record_of("Custom-GPU", True),
            CUSTOM,
            ModelChoice(GpuModel("Custom-GPU", 24000), True, SIZED_FOR),
        ),
    ],
    ids=[
        "the default model, pinned, where the pod names none",
        "not pinned in a pool of one model",
        "the model the pod selects, left as it is",
        "a model the pod selects by another of its names",
        "two names of one card are one model",
        "the default among models of different memory, pinned",
        "a model the catalogue lacks, from the memory its nodes label",
        "the model the pod was sized for, as recorded",
        "the webhook's own pin is not the pod's choice",
        "a model the pod selected and the webhook did not pin is the pod's",
        "a recorded model the pool no longer has gives way to the default",
        "a recorded model the catalogue lacks, from its nodes",
    ],
)
def test_choose_model_measures_the_share_against_one_card(
    obj: dict[str, Any],
    pool: Sharing,
    record: ShareRecord,
    inventory: MigInventory,
    choice: ModelChoice,
) -> None:
    assert choose_model(view(obj), pool, "pool", record, inventory) == choice


@pytest.mark.parametrize(
    ("obj", "pool", "rule", "message"),
    [
        (
            selecting(),
            sharing(default_model=None),
            "model-required",
            'policy "pool" has no default GPU model: select one with nodeSelector '
            f"nvidia.com/gpu.product: <model> ({KNOWN})",
        ),
        (
            selecting(affinity=required([on("In", A100.product, H200.product)])),
            sharing(),
            "model-ambiguous",
            "the pod may run on GPU models with different memory (NVIDIA-A100-SXM4-40GB (40960 "
            "MiB), NVIDIA-H200 (143771 MiB)): a share must be measured against one, so select a "
            "single nvidia.com/gpu.product",
        ),
        (
            selecting(T4.product, required([on("In", A100.product)])),
            sharing(),
            "model-conflict",
            "no GPU model satisfies the pod's nodeSelector and node affinity on "
            "nvidia.com/gpu.product",
        ),
        (
            selecting(affinity=required([on("DoesNotExist")])),
            sharing(),
            "model-conflict",
            "no GPU model satisfies the pod's nodeSelector and node affinity on "
            "nvidia.com/gpu.product",
        ),
    ],
    ids=[
        "no model named and no default",
        "models of different memory without the default among them",
        "a selector and an affinity that exclude each other",
        "an affinity to nodes without the label",
    ],
)
def test_choose_model_refuses_a_pod_it_cannot_measure(
    obj: dict[str, Any], pool: Sharing, rule: str, message: str
) -> None:
    assert choose_model(view(obj), pool, "pool", NO_RECORD) == Violation(rule, message)


@pytest.mark.parametrize(
    ("pool", "ending"),
    [
        (sharing(), "or to a GPUModelCatalogue beside the policies"),
        (EVERY_MODEL, "; no node labels its memory (nvidia.com/gpu.memory)"),
    ],
    ids=["in a pool of named models", "in a pool that takes every model"],
)
def test_choose_model_refuses_a_model_it_does_not_know_and_says_where_to_add_it(
    pool: Sharing, ending: str
) -> None:
    found = choose_model(view(selecting("GeForce-9000")), pool, "pool", NO_RECORD)
    assert isinstance(found, Violation) and found.rule == "model-unknown"
    assert found.message.startswith(
        'nvidia.com/gpu.product=GeForce-9000 is not a GPU model that policy "pool" knows'
    )
    assert "(known: Tesla-T4, NVIDIA-A100-SXM4-40GB, NVIDIA-H200" in found.message
    assert "spec.match.models" in found.message and "spec.sharing.models" in found.message
    assert found.message.endswith(ending)


def test_choose_model_names_each_product_once_where_models_have_aliases() -> None:
    found = choose_model(view(selecting("GeForce-9000")), WITH_ALIASES, "pool", NO_RECORD)
    assert isinstance(found, Violation)
    assert "(known: Tesla-T4, NVIDIA-H200)" in found.message


def test_model_choice_is_a_frozen_value_of_model_pin_and_reason() -> None:
    choice = ModelChoice(T4, True, BY_DEFAULT)
    assert choice == ModelChoice(T4, True, BY_DEFAULT)
    assert choice != ModelChoice(T4, False, BY_DEFAULT)
    with pytest.raises(AttributeError):
        choice.pin = False  # type: ignore[misc]


# owns_pin ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "record", "owned"),
    [
        (T4.product, record_of(T4.product, True), True),
        (T4.product, record_of(T4.product, False), False),
        (A100.product, record_of(T4.product, True), False),
        (None, record_of(T4.product, True), False),
        (T4.product, ShareRecord(None, True, {}), False),
    ],
    ids=[
        "the model the webhook pinned",
        "a model recorded but not pinned",
        "another model than the pinned one",
        "no selector on the model",
        "a pin without a model",
    ],
)
def test_owns_pin_only_where_the_selector_is_the_webhooks_pin(
    model: str | None, record: ShareRecord, owned: bool
) -> None:
    assert owns_pin(view(selecting(model)), sharing(), record) is owned


# named_models -----------------------------------------------------------------------------------

CATALOGUE = {"a", "b", "c"}


@pytest.mark.parametrize(
    ("obj", "named"),
    [
        (selecting(), None),
        (selecting("a"), {"a"}),
        (selecting(affinity=required([on("In", "a", "b")])), {"a", "b"}),
        (selecting("a", required([on("In", "a", "b")])), {"a"}),
        (selecting("c", required([on("In", "a", "b")])), set()),
        (selecting(affinity=required([on("NotIn", "a")])), {"b", "c"}),
        (selecting(affinity=required([on("In", "a", "b"), on("NotIn", "b")])), {"a"}),
        (selecting(affinity=required([on("NotIn", "a"), on("In", "a", "b")])), {"b"}),
        (selecting(affinity=required([on("In", "a")], [on("In", "b")])), {"a", "b"}),
        (selecting(affinity=required([on("In", "a")], [on("In", "x", key="zone")])), None),
        (selecting(affinity=required([on("In", "x", key="zone")])), None),
        (selecting(affinity=required([on("Exists")])), None),
        (selecting(affinity=required([on("Gt", "1")])), None),
        (selecting(affinity=required([])), None),
        (selecting(affinity=required([on("DoesNotExist")])), set()),
        (selecting(affinity=required([on("In", "a"), on("DoesNotExist")])), set()),
    ],
    ids=[
        "nothing named",
        "a node selector",
        "a required affinity",
        "a selector within the affinity",
        "a selector outside the affinity",
        "NotIn leaves the rest of the catalogue",
        "expressions of a term are ANDed",
        "in either order",
        "terms are ORed",
        "a term that leaves the label open leaves it open",
        "an affinity on another label",
        "Exists leaves every model",
        "an operator that does not name models",
        "a term without expressions",
        "DoesNotExist allows no model",
        "DoesNotExist beside In",
    ],
)
def test_named_models_by_selector_and_required_affinity(
    obj: dict[str, Any], named: set[str] | None
) -> None:
    assert named_models(view(obj), MODEL_LABEL, CATALOGUE) == named


@pytest.mark.parametrize(
    ("obj", "named"),
    [
        (selecting("a"), None),
        (selecting("a", required([on("In", "b")])), {"b"}),
    ],
    ids=["the selector alone names nothing", "the affinity still does"],
)
def test_named_models_ignoring_the_selector(obj: dict[str, Any], named: set[str] | None) -> None:
    assert named_models(view(obj), MODEL_LABEL, CATALOGUE, ignore_selector=True) == named


TERMS = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"nodeSelector": {MODEL_LABEL: 5}},
            "spec.nodeSelector.nvidia.com/gpu.product: must be a string",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": ["t"]
                        }
                    }
                }
            },
            f"{TERMS}[0]: must be an object",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": "x"}]
                        }
                    }
                }
            },
            f"{TERMS}[0].matchExpressions: must be a list",
        ),
        (
            {
                "affinity": required(
                    [on("NotIn", "a"), {"key": MODEL_LABEL, "operator": "In", "values": [1]}]
                )
            },
            f"{TERMS}[0].matchExpressions[1].values: must be strings",
        ),
        (
            {"affinity": required([{"key": MODEL_LABEL, "operator": "In", "values": "a"}])},
            f"{TERMS}[0].matchExpressions[0].values: must be strings",
        ),
    ],
    ids=[
        "a selector value that is no string",
        "a term that is no object",
        "expressions that are no list",
        "values that are no strings",
        "values that are no list",
    ],
)
def test_named_models_refuses_a_malformed_selector_by_its_field(
    spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(MalformedObject) as caught:
        named_models(view(pod(container("c"), **spec)), MODEL_LABEL, CATALOGUE)
    assert str(caught.value) == message


# models_named_in --------------------------------------------------------------------------------

NAMES = frozenset({T4.product, H200.product})


def pinned(obj: dict[str, Any], record: ShareRecord) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {SHARES_ANNOTATION: record.encode()}
    return obj


@pytest.mark.parametrize(
    ("obj", "named"),
    [
        (selecting(H200.product), frozenset({H200.product})),
        (selecting(), None),
        (
            selecting(affinity=required([on("NotIn", T4.product)])),
            frozenset({H200.product, ANY_OTHER_MODEL}),
        ),
        (pinned(selecting(T4.product), record_of(T4.product, True)), None),
        (pinned(selecting(T4.product), record_of(T4.product, False)), frozenset({T4.product})),
    ],
    ids=[
        "the model a pod selects",
        "none where it selects none",
        "NotIn leaves any other model too, which no policy names",
        "the webhook's own pin is left out",
        "a selector the webhook did not pin is the pod's",
    ],
)
def test_models_named_in_a_pod_as_sizing_reads_them(
    obj: dict[str, Any], named: frozenset[str] | None
) -> None:
    assert models_named_in(POD, pod_parts(obj, POD))(MODEL_LABEL, NAMES) == named


def test_models_named_in_a_template() -> None:
    obj = deployment(selecting(H200.product))
    named = models_named_in(DEPLOYMENT, pod_parts(obj, DEPLOYMENT))
    assert named(MODEL_LABEL, NAMES) == frozenset({H200.product})
    assert named("another/label", NAMES) is None


def test_choose_model_tells_apart_cards_whose_memory_is_alike_but_not_what_they_give() -> None:
    # Same memory, but one keeps 1000 MiB for its driver: a share sizes differently on each.
    card_a, card_b = GpuModel("Card-A", 16000), GpuModel("Card-B", 16000, reserved_mib=1000)
    pool = sharing(models={"Card-A": card_a, "Card-B": card_b}, default_model=None)
    both = selecting(affinity=required([on("In", "Card-A", "Card-B")]))
    found = choose_model(view(both), pool, "pool", NO_RECORD)
    assert isinstance(found, Violation) and found.rule == "model-ambiguous"
    alike = sharing(models={"Card-A": card_a, "Card-C": GpuModel("Card-C", 16000)})
    both = selecting(affinity=required([on("In", "Card-A", "Card-C")]))
    assert choose_model(view(both), alike, "pool", NO_RECORD) == ModelChoice(
        card_a, False, "nvidia.com/gpu.product selected by the pod"
    )
