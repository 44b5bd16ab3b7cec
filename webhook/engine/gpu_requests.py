"""The GPU request rules, container by container: limits only, requests equal to limits,
whole numbers, and fractions between 0 and 1 only where the policy shares the resource."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from webhook.engine.backends.rendering import ShareBackend
from webhook.engine.findings import ShareIntent, Violation, WholeGpu
from webhook.engine.pod_spec import CONTAINER_LISTS, Container, MalformedObject, PodView
from webhook.engine.share_record import NO_RECORD, ShareRecord
from webhook.engine.shares import MIB
from webhook.policy.defaults import (
    FRACTION_ANNOTATION,
    FRACTION_CONTAINER_ANNOTATION,
    MEMORY_ANNOTATION,
    SHARE_ANNOTATIONS,
    SHARES_ANNOTATION,
)
from webhook.policy.model import FractionHandling, Policy
from webhook.quantity import (
    QuantityError,
    is_binary_suffix,
    parse_quantity,
    plain_int,
    quantity_or_none,
    same_amount,
    suffix_of,
)

_ABSENT = object()
# A share asked for by annotation, or the record of one the webhook wrote (which a policy of
# another backend must clean up, even where no resource of it is left that it governs).
JUDGED_ANNOTATIONS = (*SHARE_ANNOTATIONS, SHARES_ANNOTATION)
_AMOUNT_FIELDS = ("limits", "requests")
# Suffixes that make a GPU count a count of thousands or millions: a memory amount written in
# the wrong place ("1Gi"), never a number of cards.
_COUNT_SUFFIXES = frozenset({"k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"})
# What an absent part reads as: shared, and never written.
_NO_CONTAINERS: list[Any] = []
_NO_AMOUNTS: dict[str, Any] = {}


@dataclass
class GpuRequests:
    violations: list[Violation] = field(default_factory=list)
    shares: list[ShareIntent] = field(default_factory=list)
    whole: list[WholeGpu] = field(default_factory=list)


def asks_for(
    annotations: Mapping[str, Any], spec: Mapping[str, Any], is_gpu_resource: Callable[[str], bool]
) -> bool:
    """Whether a pod with these annotations and spec carries a share annotation (or the
    webhook's record) or asks for a resource that `is_gpu_resource` names. Most pods don't,
    and leave here: so this reads the raw spec rather than a `PodView`, and says True for any
    part of the wrong type (an explicit null too, which the apiserver never sends), leaving it
    to the full reading."""
    for annotation in JUDGED_ANNOTATIONS:
        if annotation in annotations:
            return True
    # Loops and type tests rather than any() and isinstance: every pod passes here.
    for kind in CONTAINER_LISTS:
        containers = spec.get(kind, _NO_CONTAINERS)
        if type(containers) is not list:
            return True
        for container in containers:
            if type(container) is not dict or type(container.get("name")) is not str:
                return True
            resources = container.get("resources", _NO_AMOUNTS)
            if type(resources) is not dict:
                return True
            for field_name in _AMOUNT_FIELDS:
                amounts = resources.get(field_name, _NO_AMOUNTS)
                if type(amounts) is not dict:
                    return True
                for name in amounts:
                    if is_gpu_resource(name):
                        return True
    return False


def mentions_gpu(pod: PodView, policy: Policy) -> bool:
    """Whether the pod asks for anything this policy governs."""
    return asks_for(
        pod.annotations,
        pod.spec,
        lambda name: policy.is_share_resource(name) or policy.governing(name) is not None,
    )


def read_gpu_requests(
    pod: PodView,
    policy: Policy,
    record: ShareRecord = NO_RECORD,
    backend: ShareBackend | None = None,
) -> GpuRequests:
    """`record`: what the webhook wrote before, whose resources read back as the share they
    were written for; `backend`: the policy's, which reads its own dialect."""
    found = GpuRequests()
    for container in pod.containers:
        claimed = _recorded_share(container, policy, record, found)
        if not claimed:
            _recorded_claim(pod, container, policy, record, found)
        if backend is not None and not claimed:
            native = backend.read_native(container)
            if native is not None:
                found.violations.extend(native.violations)
                claimed = native.claimed
        for resource in _gpu_resources_of(container, policy):
            if resource not in claimed:
                _check_resource(container, resource, policy, found)
    if backend is not None:
        found.violations.extend(backend.read_pod(pod))
    _read_share_annotation(pod, policy, found, record)
    return found


def _recorded_claim(
    pod: PodView, container: Container, policy: Policy, record: ShareRecord, found: GpuRequests
) -> None:
    """A DRA share the webhook wrote, where the container still uses the recorded claim and the
    pod still makes it from the recorded template: read back as the share (its VRAM units)."""
    sharing = policy.sharing
    entry = record.containers.get(container.name)
    if sharing is None or entry is None or not entry.claim:
        return
    mib = plain_int(entry.mib)
    if not mib:
        return  # a record edited by hand counts as none
    used = container.uses_claim(entry.claim)
    claim = pod.claim_named(entry.claim)
    made = claim is not None and claim.get("resourceClaimTemplateName") == entry.template
    if not (used and made):
        return
    units = max(1, mib // sharing.mib_per_unit)
    found.shares.append(
        ShareIntent(
            container, "vram", sharing.vram_resource, entry.vram, None, units, False, recorded=True
        )
    )


def _recorded_share(
    container: Container, policy: Policy, record: ShareRecord, found: GpuRequests
) -> frozenset[str]:
    """The resources a backend wrote for this container's share, when the container still has
    them as the record says: read back as the share (its VRAM units) and claimed, so that a
    backend's `nvidia.com/gpu: 1` or MIG device is not taken for a whole GPU."""
    sharing = policy.sharing
    entry = record.containers.get(container.name)
    if sharing is None or entry is None or not entry.given:
        return frozenset()  # records from before backends: the VRAM resource reads as itself
    mib = plain_int(entry.mib)
    if not mib:
        return frozenset()  # a record edited by hand counts as none
    given = entry.given
    for resource, amount in given.items():
        limit = container.limits.get(resource, _ABSENT)
        request = container.requests.get(resource, limit)
        if not (same_amount(limit, amount) and same_amount(request, amount)):
            return frozenset()
    in_requests = any(resource in container.requests for resource in given)
    # Named by the resource that holds its memory where the backend wrote one.
    memory = sharing.memory_resources
    named = next((resource for resource in given if resource in memory), next(iter(given)))
    # In the policy's unit now, whatever it was when written (rounded down: never more).
    units = max(1, mib // sharing.mib_per_unit)
    found.shares.append(
        ShareIntent(
            container,
            "vram",
            named,
            entry.vram,
            None,
            units,
            in_requests,
            recorded=True,
        )
    )
    return frozenset(given)


def _gpu_resources_of(container: Container, policy: Policy) -> list[str]:
    names = dict.fromkeys([*container.limits, *container.requests])
    return [name for name in names if policy.is_vram(name) or policy.governing(name)]


def _check_resource(
    container: Container, resource: str, policy: Policy, found: GpuRequests
) -> None:
    where = f"{container.label}: {resource}"
    limit_value = container.limits.get(resource, _ABSENT)
    request_value = container.requests.get(resource, _ABSENT)
    if limit_value is _ABSENT:
        found.violations.append(
            Violation(
                "limits-required",
                f'{where} is in requests ("{request_value}") but not in limits: GPU resources are '
                f"given under limits; move it to resources.limits",
            )
        )
        return
    limit = _parse(container, "limits", resource, limit_value, found)
    if limit is None:
        return
    if request_value is not _ABSENT:
        request = _parse(container, "requests", resource, request_value, found)
        if request is None:
            return
        if request != limit:
            found.violations.append(
                Violation(
                    "requests-equal-limits",
                    f'{where} requests "{request_value}" differ from limits "{limit_value}": for '
                    f'GPU resources requests must equal limits; write "{limit_value}" in both, '
                    "or leave requests out",
                )
            )
            return
    if limit < 0:
        if policy.is_vram(resource):
            advice = "ask for a whole number of units"
        elif _shares(resource, policy):
            advice = "ask for a whole number of GPUs, or a fraction between 0 and 1"
        else:
            advice = "ask for a whole number of GPUs"
        found.violations.append(
            Violation("not-negative", f'{where} "{limit_value}" is negative: {advice}')
        )
        return
    in_requests = request_value is not _ABSENT
    if policy.is_vram(resource):
        _check_vram(container, resource, limit_value, limit, in_requests, policy, found)
    elif suffix_of(limit_value) in _COUNT_SUFFIXES:
        found.violations.append(_count_with_suffix(where, str(limit_value), resource, policy))
    elif limit.denominator == 1:
        if limit > 0:
            found.whole.append(WholeGpu(container, resource, int(limit)))
    elif limit > 1:
        found.violations.append(
            Violation(
                "whole-number",
                f'{where} "{limit_value}" is not a whole number: a share above one GPU cannot be '
                f"given; ask for {int(limit)} or {int(limit) + 1}",
            )
        )
    elif _shares(resource, policy):
        found.shares.append(
            ShareIntent(container, "quantity", resource, str(limit_value), limit, None, in_requests)
        )
    else:
        found.violations.append(_fraction_denied(where, str(limit_value), resource, policy))


def _check_vram(
    container: Container,
    resource: str,
    written: object,
    amount: Fraction,
    in_requests: bool,
    policy: Policy,
    found: GpuRequests,
) -> None:
    if is_binary_suffix(suffix_of(written)):
        _check_memory(container, resource, str(written), amount, in_requests, policy, found)
    elif amount.denominator != 1:
        found.violations.append(
            Violation(
                "whole-number",
                f'{container.label}: {resource} "{written}" is not a whole number: ask for a '
                f"whole number of units, or for a fraction of a GPU and let the webhook size it",
            )
        )
    elif amount > 0:
        found.shares.append(
            ShareIntent(container, "vram", resource, str(written), None, int(amount), in_requests)
        )


def _check_memory(
    container: Container,
    resource: str,
    written: str,
    amount: Fraction,
    in_requests: bool,
    policy: Policy,
    found: GpuRequests,
) -> None:
    """The VRAM resource written as bytes with a binary suffix ("4Gi"): an amount of memory,
    to be given in the policy's unit. One that is no whole number of it is refused rather than
    rounded."""
    sharing = policy.sharing
    if sharing is None or amount == 0:
        return
    unit_bytes = sharing.mib_per_unit * MIB
    units = amount / unit_bytes
    if units.denominator != 1:
        above = int(units) + 1
        suffix = sharing.unit.removesuffix("B")  # MiB -> Mi, GiB -> Gi
        found.violations.append(
            Violation(
                "whole-units",
                f'{container.label}: {resource} "{written}" is not a whole number of '
                f'{sharing.unit}, the unit it is given in: ask for "{above}{suffix}" (or '
                f'"{above}"), or for a fraction of a GPU',
            )
        )
        return
    found.shares.append(
        ShareIntent(container, "memory", resource, written, None, int(units), in_requests)
    )


def _count_with_suffix(where: str, written: str, resource: str, policy: Policy) -> Violation:
    sharing = policy.sharing
    if sharing is not None and _shares(resource, policy):
        # Only a binary suffix reads as bytes on the VRAM resource: "2k" there is 2000 units.
        memory = written if is_binary_suffix(suffix_of(written)) else "4Gi"
        advice = (
            f"for GPU memory write {sharing.vram_resource}: {memory} (given in "
            f"{sharing.unit}), or a fraction such as {resource}: 0.5"
        )
    else:
        advice = "ask for a whole number of GPUs"
    return Violation(
        "count-with-suffix",
        f'{where} "{written}" counts GPUs, and the suffix makes it {parse_quantity(written)} of '
        f"them: {advice}",
    )


def _parse(
    container: Container, field_name: str, resource: str, value: object, found: GpuRequests
) -> Fraction | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        path = (*container.path, "resources", field_name, resource)
        raise MalformedObject(path, 'must be a quantity such as "1" or "500m"')
    try:
        return parse_quantity(value)
    except QuantityError as error:
        where = f"{container.label}: {resource} {field_name}"
        found.violations.append(Violation("malformed-quantity", f"{where}: {error}"))
        return None


def _shares(resource: str, policy: Policy) -> bool:
    governed = policy.governing(resource)
    return (
        policy.sharing is not None
        and governed is not None
        and governed.fractions is FractionHandling.REWRITE
    )


def _fraction_denied(where: str, written: str, resource: str, policy: Policy) -> Violation:
    return Violation(
        "fraction-denied",
        f'{where} "{written}" is a fraction of a GPU, and policy "{policy.name}" does not share '
        f"{resource}: ask for 1 whole GPU",
    )


def _read_share_annotation(
    pod: PodView, policy: Policy, found: GpuRequests, record: ShareRecord
) -> None:
    """The share a pod asks for in an annotation, KAI Scheduler's way: `gpu-fraction` (of the
    card) or `gpu-memory` (MiB), for the container `gpu-fraction-container-name` names."""
    present = [name for name in SHARE_ANNOTATIONS if name in pod.annotations]
    if not present:
        return
    if len(present) > 1:
        found.violations.append(
            Violation(
                "annotation-conflict",
                f"annotations {FRACTION_ANNOTATION} and {MEMORY_ANNOTATION} both ask for a share "
                "of a GPU: keep one of the two",
            )
        )
        return
    (annotation,) = present
    written = pod.annotations[annotation]
    if annotation == FRACTION_ANNOTATION:
        fraction, units = _annotated_fraction(written, found), None
        if fraction is None:
            return
    else:
        fraction, units = None, _annotated_memory(written, policy, found)
        if units is None:
            return
    where = f"annotation {annotation}"
    container = _annotated_container(pod, found, annotation)
    if container is None:
        return
    resource = next(
        (r.name for r in policy.resources if r.fractions is FractionHandling.REWRITE), None
    )
    if resource is None or policy.sharing is None:
        found.violations.append(
            Violation(
                "fraction-denied",
                f'{where} "{written}" asks for a share of a GPU, and policy "{policy.name}" '
                "shares no GPU resource: ask for 1 whole GPU in resources.limits",
            )
        )
        return
    if any(w.container is container for w in found.whole) or any(
        s.container is container and s.source in ("quantity", "memory") for s in found.shares
    ):
        if record.annotations.get(annotation) == written:
            return  # the webhook wrote it for a share that these resources now replace
        found.violations.append(
            Violation(
                "annotation-conflict",
                f"{where} and resources of {container.label} both ask for GPUs: "
                "keep one of the two",
            )
        )
        return
    found.shares.append(
        ShareIntent(
            container,
            "annotation",
            resource if units is None else policy.sharing.vram_resource,
            written,
            fraction,
            units,
            annotation=annotation,
        )
    )


def _annotated_fraction(written: object, found: GpuRequests) -> Fraction | None:
    fraction = quantity_or_none(written) if isinstance(written, str) else None
    if fraction is None or not 0 < fraction < 1:
        found.violations.append(
            Violation(
                "annotation-fraction",
                f'annotation {FRACTION_ANNOTATION} "{written}" must be a number between 0 and 1, '
                'such as "0.5"; for whole GPUs ask for them in resources.limits',
            )
        )
        return None
    return fraction


def _annotated_memory(written: object, policy: Policy, found: GpuRequests) -> int | None:
    """The policy's units for `gpu-memory`, which KAI reads as MiB written in plain digits."""
    where = f'annotation {MEMORY_ANNOTATION} "{written}"'
    mib = plain_int(written) or 0
    if mib <= 0:
        found.violations.append(
            Violation(
                "annotation-memory",
                f'{where} must be a positive whole number of MiB with no suffix, such as "2048"',
            )
        )
        return None
    sharing = policy.sharing
    if sharing is None:
        return mib  # denied below, as any share without sharing
    units, rest = divmod(mib, sharing.mib_per_unit)
    if rest:
        found.violations.append(
            Violation(
                "whole-units",
                f"{where} is not a whole number of {sharing.unit}, the unit "
                f"{sharing.vram_resource} is given in: ask for "
                f'"{(units + 1) * sharing.mib_per_unit}"',
            )
        )
        return None
    return units


def _annotated_container(pod: PodView, found: GpuRequests, annotation: str) -> Container | None:
    name = pod.annotations.get(FRACTION_CONTAINER_ANNOTATION)
    if name is None:
        container = pod.first_container()
        if container is None:
            found.violations.append(
                Violation(
                    "annotation-container",
                    f"annotation {annotation} asks for a share of a GPU, but the pod has no "
                    "container",
                )
            )
        return container
    container = pod.container_named(name) if isinstance(name, str) else None
    if container is None:
        names = ", ".join(c.name for c in pod.containers)
        found.violations.append(
            Violation(
                "annotation-container",
                f'annotation {FRACTION_CONTAINER_ANNOTATION} names "{name}", which is not a '
                f"container of this pod ({names})",
            )
        )
    return container
