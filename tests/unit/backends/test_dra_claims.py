"""dra_claims.py, one table per function: the memory a claim asks (`request_mib`), the cores
it asks (`cores_percent`), the name the pod knows it by (`claim_name`), the template it is
made from (`claim_template`), and whether a stored template asks capacity (`asks_capacity`).
Shares are of an NVIDIA-H200 (143771 MiB) under examples/dra, where a quarter is 35942 MiB."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import replace
from typing import Any

import pytest

from tests.unit.backends.pieces import (
    A100,
    dra_sharing,
    example_sharing,
    in_view,
    of_gpu,
    of_memory,
    pod,
    sized,
    view,
)
from webhook.engine.backends.dra_claims import (
    CLAIM_API_VERSION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REQUEST_NAME,
    SPEC_DIGEST_ANNOTATION,
    TEMPLATE_KIND,
    asks_capacity,
    claim_name,
    claim_template,
    cores_percent,
    request_mib,
)
from webhook.engine.shares import SizedShare
from webhook.policy.model import DraAlternative, DraChoice, DraSettings

SHARE = dra_sharing("h200-share")  # gpu.nvidia.com, memory only
HAMI = dra_sharing("hami-dra")  # hami-core-gpu.project-hami.io, memory and cores
FALLBACK = dra_sharing("h200-fallback")  # MIG, then Share, then WholeGPU
assert SHARE.dra is not None and HAMI.dra is not None and FALLBACK.dra is not None
NVIDIA, HAMI_DRA, FIRST = SHARE.dra, HAMI.dra, FALLBACK.dra
CONFIG = {
    "driver": "gpu.nvidia.com",
    "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"},
}


def of_mib(mib: int) -> SizedShare:
    return sized(of_memory(in_view(view(pod())), SHARE, mib), SHARE)


QUARTER = sized(of_gpu(in_view(view(pod())), "0.25"), SHARE)


# request_mib --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mib", "step", "asked"),
    [
        (4096, 1, 4096),
        (2, 256, 257),
        (4096, 1024, 4097),
        (4097, 1024, 4097),
        (4098, 1024, 5121),
    ],
    ids=[
        "a step of 1 MiB asks the share itself",
        "2 MiB in steps of 256 above 1 is 257",
        "4096 MiB in steps of 1024 above 1 is 4097",
        "4097 MiB is 1 plus four whole steps already",
        "one MiB more takes a fifth step, 5121",
    ],
)
def test_request_mib_is_the_minimum_plus_whole_steps_that_hold_the_share(
    mib: int, step: int, asked: int
) -> None:
    assert request_mib(of_mib(mib), replace(NVIDIA, request_step_mib=step)) == asked


# cores_percent ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "percent"),
    [
        (sized(of_gpu(in_view(view(pod())), "0.5"), SHARE), 49),
        (of_mib(1437), 1),
        (of_mib(2876), 2),
        (sized(of_gpu(in_view(view(pod())), "0.25"), example_sharing("mig"), A100), 25),
    ],
    ids=[
        "half an H200, 71885 MiB, is 49 percent of 143771, rounded down",
        "1437 MiB, under 1 percent, is given 1",
        "2876 MiB is 2 percent",
        "a quarter of an A100 40GB is 25 percent",
    ],
)
def test_cores_percent_is_the_shares_percent_of_the_card_rounded_down_at_least_one(
    share: SizedShare, percent: int
) -> None:
    assert cores_percent(share) == percent


# claim_name ---------------------------------------------------------------------------------

DIGEST = re.compile(r"-[a-z2-7]{8}$")


@pytest.mark.parametrize(
    ("container", "kept", "length"),
    [
        ("infer", "gpu-share-infer", 15),
        ("a" * 53, "gpu-share-" + "a" * 53, 63),
        ("a" * 54, "gpu-share-" + "a" * 44, 63),
        ("a" * 43 + "-" + "b" * 20, "gpu-share-" + "a" * 43, 62),
    ],
    ids=[
        "a short container name is prefixed",
        "a name of 63 characters is kept whole",
        "a longer one is cut and ends in a digest, 63 characters in all",
        "a cut that ends on a hyphen drops it rather than doubling it",
    ],
)
def test_claim_name_is_a_dns_label_named_after_the_container(
    container: str, kept: str, length: int
) -> None:
    name = claim_name(container)
    assert name.startswith(kept)
    assert len(name) == length
    assert (DIGEST.search(name) is not None) is (name != kept)
    assert "--" not in name


def test_claim_name_tells_apart_long_names_that_differ_only_past_the_cut() -> None:
    first, second = claim_name("x" * 60 + "-one"), claim_name("x" * 60 + "-two")
    assert first[:54] == second[:54] and first != second


# claim_template -----------------------------------------------------------------------------


def _requests(template: dict[str, Any]) -> list[Any]:
    return template["spec"]["spec"]["devices"]["requests"]


def test_claim_template_of_a_quarter_h200_is_one_device_with_its_memory_as_capacity() -> None:
    name, template = claim_template(QUARTER, NVIDIA)
    digest = template["metadata"]["annotations"][SPEC_DIGEST_ANNOTATION]
    assert name == f"gpu-share-35942mi-{digest[:10]}"
    assert template == {
        "apiVersion": CLAIM_API_VERSION,
        "kind": TEMPLATE_KIND,
        "metadata": {
            "name": name,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
            "annotations": {SPEC_DIGEST_ANNOTATION: digest},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": REQUEST_NAME,
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "capacity": {"requests": {"memory": "35942Mi"}},
                            },
                        }
                    ]
                }
            }
        },
    }
    assert (CLAIM_API_VERSION, TEMPLATE_KIND) == ("resource.k8s.io/v1", "ResourceClaimTemplate")
    assert (MANAGED_BY_LABEL, MANAGED_BY) == ("app.kubernetes.io/managed-by", "gpu-admission")


def test_claim_template_digest_is_the_spec_in_canonical_json_and_names_the_template() -> None:
    name, template = claim_template(QUARTER, NVIDIA)
    canonical = json.dumps(template["spec"], sort_keys=True, separators=(",", ":"))
    raw = hashlib.sha256(canonical.encode()).digest()
    digest = base64.b32encode(raw).decode().lower().rstrip("=")
    assert template["metadata"]["annotations"][SPEC_DIGEST_ANNOTATION] == digest
    assert name.endswith(digest[:10]) and len(digest) == 52


@pytest.mark.parametrize(
    ("dra", "exactly"),
    [
        (
            HAMI_DRA,
            {
                "deviceClassName": "hami-core-gpu.project-hami.io",
                "capacity": {"requests": {"memory": "35942Mi", "cores": "24"}},
            },
        ),
        (
            replace(NVIDIA, request_step_mib=256),
            {
                "deviceClassName": "gpu.nvidia.com",
                "capacity": {"requests": {"memory": "36097Mi"}},
            },
        ),
        (
            replace(NVIDIA, selectors=("device.attributes['gpu.nvidia.com'].arch == 'Hopper'",)),
            {
                "deviceClassName": "gpu.nvidia.com",
                "selectors": [
                    {"cel": {"expression": "device.attributes['gpu.nvidia.com'].arch == 'Hopper'"}}
                ],
                "capacity": {"requests": {"memory": "35942Mi"}},
            },
        ),
        (
            replace(NVIDIA, memory_capacity="gpu.example.com/memory"),
            {
                "deviceClassName": "gpu.nvidia.com",
                "capacity": {"requests": {"gpu.example.com/memory": "35942Mi"}},
            },
        ),
    ],
    ids=[
        "on HAMi's driver the share asks its cores too, 24 percent",
        "memory is asked in the driver's steps, 36097Mi",
        "the policy's selectors are asked as CEL",
        "memory is asked as the capacity the policy names",
    ],
)
def test_claim_template_asks_the_share_as_the_policy_says(
    dra: DraSettings, exactly: dict[str, Any]
) -> None:
    name, template = claim_template(QUARTER, dra)
    assert _requests(template) == [{"name": "gpu", "exactly": exactly}]
    memory = next(iter(exactly["capacity"]["requests"].values()))
    assert name.startswith(f"gpu-share-{memory.lower()}-")
    assert "config" not in template["spec"]["spec"]["devices"]


def test_claim_template_lists_the_alternatives_in_the_policys_order() -> None:
    share = of_mib(16384)
    _, template = claim_template(share, FIRST)
    assert _requests(template) == [
        {
            "name": "gpu",
            "firstAvailable": [
                {
                    "name": "mig",
                    "deviceClassName": "mig.nvidia.com",
                    "selectors": [
                        {
                            "cel": {
                                "expression": "device.attributes['gpu.nvidia.com'].profile "
                                "== '1g.18gb'"
                            }
                        }
                    ],
                },
                {
                    "name": "share",
                    "deviceClassName": "gpu.nvidia.com",
                    "capacity": {"requests": {"memory": "16384Mi"}},
                },
                {"name": "whole", "deviceClassName": "gpu.nvidia.com"},
            ],
        }
    ]


PIN = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"
OWN = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('140Gi')) >= 0"
MIG_18 = "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"


@pytest.mark.parametrize(
    ("dra", "mib", "selectors"),
    [
        (FIRST, 143500, {"share": None, "whole": None}),
        (
            replace(FIRST, selectors=(PIN,)),
            16384,
            {"mig": [MIG_18], "share": [PIN], "whole": [PIN]},
        ),
        (
            replace(
                FIRST,
                first_available=(
                    DraChoice(DraAlternative.MIG, "mig.nvidia.com", (OWN,)),
                    DraChoice(DraAlternative.SHARE, "gpu.nvidia.com", (OWN,)),
                ),
            ),
            16384,
            {"mig": [MIG_18, OWN], "share": [OWN]},
        ),
        (
            replace(FIRST, attribute_domain="gpu.example.com"),
            33000,
            {
                "mig": ["device.attributes['gpu.example.com'].profile == '1g.35gb'"],
                "share": None,
                "whole": None,
            },
        ),
    ],
    ids=[
        "a share no MIG profile of the H200 holds leaves the MIG alternative out",
        "the policy's selectors hold for alternatives of its class, not for a MIG device",
        "an alternative's own selectors follow the MIG profile's",
        "the MIG profile, 1g.35gb for 33000 MiB, is read in the policy's attribute domain",
    ],
)
def test_claim_template_selects_each_alternative_as_its_class_allows(
    dra: DraSettings, mib: int, selectors: dict[str, list[str] | None]
) -> None:
    _, template = claim_template(of_mib(mib), dra)
    (request,) = _requests(template)
    found = {
        alternative["name"]: [s["cel"]["expression"] for s in alternative["selectors"]]
        if "selectors" in alternative
        else None
        for alternative in request["firstAvailable"]
    }
    assert found == selectors


@pytest.mark.parametrize(
    ("dra", "mib", "config"),
    [
        (replace(NVIDIA, config=CONFIG), 35942, {"opaque": CONFIG}),
        (
            replace(FIRST, config=CONFIG),
            16384,
            {"opaque": CONFIG, "requests": ["gpu/share", "gpu/whole"]},
        ),
        (replace(FIRST, config=CONFIG), 143500, {"opaque": CONFIG}),
    ],
    ids=[
        "a configuration is given to the one request",
        "beside a MIG alternative it is given to the sub-requests of its own class",
        "where the MIG alternative is left out it is given to every sub-request",
    ],
)
def test_claim_template_gives_the_policys_configuration_to_its_own_class(
    dra: DraSettings, mib: int, config: dict[str, Any]
) -> None:
    _, template = claim_template(of_mib(mib), dra)
    assert template["spec"]["spec"]["devices"]["config"] == [config]


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ((of_mib(35942), NVIDIA), (QUARTER, NVIDIA), True),
        ((of_mib(35942), NVIDIA), (of_mib(35943), NVIDIA), False),
        ((QUARTER, NVIDIA), (QUARTER, replace(NVIDIA, config=CONFIG)), False),
        ((QUARTER, NVIDIA), (QUARTER, HAMI_DRA), False),
    ],
    ids=[
        "the same size asked two ways is one template",
        "another size is another template",
        "another configuration is another template",
        "another driver is another template",
    ],
)
def test_claim_template_is_named_from_its_content(
    first: tuple[SizedShare, DraSettings], second: tuple[SizedShare, DraSettings], same: bool
) -> None:
    assert (claim_template(*first)[0] == claim_template(*second)[0]) is same


# asks_capacity ------------------------------------------------------------------------------


def _spec(*requests: Any) -> dict[str, Any]:
    return {"spec": {"devices": {"requests": list(requests)}}}


CAPACITY = {"deviceClassName": "c", "capacity": {"requests": {"memory": "1Mi"}}}
WHOLE = {"deviceClassName": "c"}


@pytest.mark.parametrize(
    ("spec", "asks"),
    [
        (claim_template(QUARTER, NVIDIA)[1]["spec"], True),
        (claim_template(of_mib(143500), FIRST)[1]["spec"], True),
        (_spec({"name": "gpu", "exactly": WHOLE}), False),
        (_spec({"name": "gpu", "firstAvailable": [WHOLE, CAPACITY]}), True),
        (_spec("junk", {"name": "gpu", "exactly": CAPACITY}), True),
        (_spec({"name": "gpu", "exactly": {"deviceClassName": "c", "capacity": {}}}), False),
        (_spec({"name": "gpu", "firstAvailable": None}), False),
        ({"spec": {"devices": {"requests": "gpu"}}}, False),
        ({"spec": None}, False),
        ("spec", False),
        (None, False),
    ],
    ids=[
        "a share's template asks capacity",
        "a template of alternatives asks it in its share",
        "a whole device asks none",
        "an alternative after a whole one may ask it",
        "an entry that is no request is passed over",
        "an empty capacity asks none",
        "no alternatives ask none",
        "requests that are no list ask none",
        "a template without a spec asks none",
        "text is no spec",
        "nothing asks nothing",
    ],
)
def test_asks_capacity_finds_consumable_capacity_in_any_device_requested(
    spec: object, asks: bool
) -> None:
    assert asks_capacity(spec) is asks


def test_claim_template_gives_no_configuration_where_no_alternative_is_of_its_class() -> None:
    # An empty `requests` list would give the configuration to every request.
    others = (
        DraChoice(DraAlternative.MIG, "mig.nvidia.com"),
        DraChoice(DraAlternative.SHARE, "other.example.com", ("device.attributes['x'].y",)),
    )
    dra = DraSettings("gpu.nvidia.com", selectors=("mine",), config=CONFIG, first_available=others)
    _, template = claim_template(of_mib(16384), dra)
    devices = template["spec"]["spec"]["devices"]
    assert "config" not in devices
    share = devices["requests"][0]["firstAvailable"][1]
    assert share["selectors"] == [{"cel": {"expression": "device.attributes['x'].y"}}]
