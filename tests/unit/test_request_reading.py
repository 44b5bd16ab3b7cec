"""Reading the request out of a review: the quick path for what the apiserver sends must say
exactly what the field-by-field reading says, for any field of any type."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from webhook.admission.review import (
    MalformedRequest,
    ReviewEnvelope,
    _checked_request,
    read_request,
)

ABSENT = object()
VALUES = st.one_of(
    st.just(ABSENT),
    st.none(),
    st.sampled_from(["", "apps", "v1", "Pod", "CREATE", "status", "team-a"]),
    st.integers(),
    st.booleans(),
    st.lists(st.text(max_size=2), max_size=1),
)
VALID_KIND = {"group": "", "version": "v1", "kind": "Pod"}
VALID_REQUEST = {"operation": "CREATE", "namespace": "team-a", "name": "p"}
# Any field of a valid request replaced by anything, up to three at a time.
KIND_CHANGES = st.dictionaries(st.sampled_from(sorted(VALID_KIND)), VALUES, max_size=3)
REQUEST_CHANGES = st.dictionaries(
    st.sampled_from(["kind", "operation", "subResource", "namespace", "name", "dryRun"]),
    VALUES,
    max_size=3,
)


def _changed(valid: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    merged = {**valid, **changes}
    return {key: value for key, value in merged.items() if value is not ABSENT}


def _outcome(read: Any, envelope: ReviewEnvelope) -> object:
    try:
        return read(envelope)
    except MalformedRequest as error:
        return ("malformed", str(error))


@given(KIND_CHANGES, REQUEST_CHANGES)
def test_the_quick_reading_agrees_with_the_checked_one(
    kind_changes: dict[str, Any], request_changes: dict[str, Any]
) -> None:
    raw = _changed({"kind": _changed(VALID_KIND, kind_changes), **VALID_REQUEST}, request_changes)
    raw["object"] = {"kind": "Pod"}
    envelope = ReviewEnvelope("admission.k8s.io/v1", "uid-1", raw)
    assert _outcome(read_request, envelope) == _outcome(_checked_request, envelope)


def test_a_pod_creation_as_the_apiserver_sends_it() -> None:
    raw = {
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "team-a",
        "object": {"kind": "Pod"},
        "dryRun": True,
    }
    request = read_request(ReviewEnvelope("admission.k8s.io/v1", "uid-1", raw))
    assert (request.kind, request.operation, request.namespace, request.name) == (
        "Pod",
        "CREATE",
        "team-a",
        "",
    )
    assert request.object == {"kind": "Pod"} and request.dry_run is True
