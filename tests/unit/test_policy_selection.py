"""Which policy governs an object: names, globs, label selectors, exclusions, priorities,
unknown namespace labels, and the built-in rules where nothing matches."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.policy.label_selectors import LabelSelector, ValueSet, requirement
from webhook.policy.model import Policy
from webhook.policy.namespace_labels import LabelLookup, NoCluster, StaticNamespaceLabels
from webhook.policy.namespace_patterns import NamespacePatterns, globs_intersect
from webhook.policy.overlaps import _candidate_pairs
from webhook.policy.policy_set import PolicySet
from webhook.policy.scope import AdmissionTarget, Match, Scope

POLICIES = """\
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: cluster-default}
spec: {}
---
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: ml-teams}
spec:
  priority: 10
  match:
    namespaces: [ml-*]
  exclude:
    objectSelector: {matchLabels: {gpu-policy: none}}
---
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: opted-in}
spec:
  priority: 20
  match:
    namespaceSelector: {matchLabels: {gpu-sharing: enabled}}
---
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: production}
spec:
  priority: 100
  match:
    namespaces: [payments, search]
    objectSelector:
      matchExpressions: [{key: tier, operator: NotIn, values: [batch]}]
---
apiVersion: gpu-admission.example.com/v1alpha1
kind: GPUPolicy
metadata: {name: system}
spec:
  match:
    namespaces: [kube-system]
"""


@pytest.fixture(scope="module")
def policy_set(tmp_path_factory: pytest.TempPathFactory) -> PolicySet:
    directory = tmp_path_factory.mktemp("policies")
    (directory / "policies.yaml").write_text(POLICIES)
    return PolicySet.load(directory)


@dataclass(frozen=True)
class Case:
    id: str
    namespace: str
    expected: str
    namespace_labels: Mapping[str, str] | None = None
    object_labels: Mapping[str, str] | None = None
    skipped: tuple[str, ...] = ()


CASES = [
    Case("a plain namespace gets the catch-all", "web", "cluster-default", {}),
    Case("a glob beats the catch-all by priority", "ml-research", "ml-teams", {}),
    Case(
        "an exclusion passes the object to the next policy",
        "ml-research",
        "cluster-default",
        {},
        {"gpu-policy": "none"},
    ),
    Case("a namespace label opts in", "web", "opted-in", {"gpu-sharing": "enabled"}),
    Case(
        "the highest priority wins among several matches",
        "ml-research",
        "opted-in",
        {"gpu-sharing": "enabled"},
    ),
    Case("an exact name with an object selector", "payments", "production", {}, {"tier": "web"}),
    Case("NotIn matches objects without the key", "payments", "production", {}, {}),
    Case("NotIn leaves out the listed value", "payments", "cluster-default", {}, {"tier": "batch"}),
    Case("kube-system only by its exact name", "kube-system", "system", {}),
    Case(
        "unknown labels: label policies are skipped and said so",
        "ml-research",
        "ml-teams",
        None,
        skipped=("opted-in",),
    ),
    Case(
        "unknown labels cannot hide a higher name match",
        "payments",
        "production",
        None,
    ),
]


def lookup_for(case: Case) -> StaticNamespaceLabels | NoCluster:
    if case.namespace_labels is None:
        return NoCluster("the API is down")
    return StaticNamespaceLabels({case.namespace: case.namespace_labels})


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_selection(policy_set: PolicySet, case: Case) -> None:
    selection = policy_set.select(case.namespace, case.object_labels or {}, lookup_for(case))
    assert selection.policy.name == case.expected
    assert tuple(policy.name for policy in selection.skipped) == case.skipped
    warnings = selection.warnings(case.namespace)
    if case.skipped:
        (warning,) = warnings
        assert "the API is down" in warning and '"opted-in"' in warning
        assert f'policy "{case.expected}" applied' in warning
        assert len(warning) < 120
    else:
        assert warnings == ()


class CountingLabels:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def labels_of(self, namespace: str) -> LabelLookup:
        self.asked.append(namespace)
        return LabelLookup.known({})


def test_namespace_labels_are_looked_up_only_when_a_candidate_needs_them(
    policy_set: PolicySet,
) -> None:
    labels = CountingLabels()
    assert policy_set.select("payments", {}, labels).policy.name == "production"
    assert labels.asked == []
    assert policy_set.select("web", {}, labels).policy.name == "cluster-default"
    assert labels.asked == ["web"]


def test_no_match_gets_the_built_in_rules(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(POLICIES.split("---")[1])
    selection = PolicySet.load(tmp_path).select("web", {}, NoCluster())
    assert selection.policy.name == "built-in"
    assert selection.policy.sharing is None


def test_a_thousand_exact_policies_are_indexed_by_namespace(tmp_path: Path) -> None:
    documents = [
        "apiVersion: gpu-admission.example.com/v1alpha1\nkind: GPUPolicy\n"
        f"metadata: {{name: team-{i}}}\nspec:\n  match: {{namespaces: [team-{i}]}}\n"
        for i in range(1000)
    ]
    (tmp_path / "teams.yaml").write_text("---\n".join(documents))
    policy_set = PolicySet.load(tmp_path)
    assert policy_set.select("team-734", {}, NoCluster()).policy.name == "team-734"
    assert policy_set.select("team-x", {}, NoCluster()).policy.name == "built-in"
    assert len(policy_set._candidates("team-734")) == 1


# The set algebra behind the overlap check, against brute force over a small universe.

ALPHABET = "ab-"
GLOB_TEXT = st.text(alphabet="ab-*?", min_size=1, max_size=3)
NAMES = ["".join(letters) for n in range(7) for letters in itertools.product(ALPHABET, repeat=n)]


@given(GLOB_TEXT, GLOB_TEXT)
def test_glob_intersection_agrees_with_brute_force(a: str, b: str) -> None:
    first, second = NamespacePatterns((a,)), NamespacePatterns((b,))
    brute = any(first.matches(name) and second.matches(name) for name in NAMES)
    # Each character of a shortest shared name consumes a non-star character of one glob,
    # so two globs of at most 3 characters share a name of at most 6 if they share any.
    assert globs_intersect(a, b) == brute


PATTERN_TEXT = st.text(alphabet="ab-*?", min_size=1, max_size=3)
PATTERNS = st.none() | st.lists(PATTERN_TEXT, min_size=1, max_size=2).map(
    lambda texts: NamespacePatterns(tuple(texts))
)


@given(st.lists(PATTERNS, min_size=2, max_size=6))
def test_overlap_candidates_hold_every_pair_whose_namespaces_meet(
    patterns: list[NamespacePatterns | None],
) -> None:
    policies = [
        Policy(name=f"p{i}", resources=(), match=Scope(namespaces=names))
        for i, names in enumerate(patterns)
    ]
    candidates = {(a.name, b.name) for a, b in _candidate_pairs(policies)}

    def admits(names: NamespacePatterns | None, name: str) -> bool:
        return names is None or names.matches(name)

    for i, j in itertools.combinations(range(len(policies)), 2):
        meet = any(admits(patterns[i], name) and admits(patterns[j], name) for name in NAMES)
        if meet:
            assert (f"p{i}", f"p{j}") in candidates


@given(
    st.lists(st.tuples(PATTERNS, st.integers(0, 2)), min_size=1, max_size=6),
    st.lists(st.sampled_from([*NAMES[:40], "kube-system"]), min_size=1, max_size=8),
)
def test_selection_tries_the_same_policies_as_a_scan_of_all(
    policies: list[tuple[NamespacePatterns | None, int]], namespaces: list[str]
) -> None:
    built = [
        Policy(name=f"p{i}", resources=(), priority=priority, match=Scope(namespaces=names))
        for i, (names, priority) in enumerate(policies)
    ]
    policy_set = PolicySet(tuple(built))
    ranked = sorted(built, key=lambda p: (-p.priority, p.name))
    for namespace in namespaces * 2:  # the second time from the memo
        target = AdmissionTarget(namespace, {}, {})
        scanned = next((p for p in ranked if p.applies_to(target) is Match.YES), None)
        chosen = policy_set.select(namespace, {}, NoCluster()).policy
        assert chosen is (scanned or policy_set.fallback)


KEYS = ("tier", "env")
VALUES = ("gold", "prod")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
REQUIREMENT = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(OPERATORS),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=2),
)
SELECTOR = st.lists(REQUIREMENT, max_size=3)
LABEL_MAPS = [
    {key: value for key, value in zip(KEYS, choice, strict=True) if value is not None}
    for choice in itertools.product((None, *VALUES, "other"), repeat=len(KEYS))
]


def build(requirements: list[tuple[str, str, list[str]]]) -> LabelSelector:
    return LabelSelector.build(
        (key, requirement(op, values if op in ("In", "NotIn") else []))  # type: ignore[arg-type]
        for key, op, values in requirements
    )


@given(SELECTOR, SELECTOR)
def test_selector_overlap_and_containment_agree_with_brute_force(
    a: list[tuple[str, str, list[str]]], b: list[tuple[str, str, list[str]]]
) -> None:
    first, second = build(a), build(b)
    both = [labels for labels in LABEL_MAPS if first.matches(labels) and second.matches(labels)]
    assert first.overlaps(second) == bool(both)
    inside = all(second.matches(labels) for labels in LABEL_MAPS if first.matches(labels))
    assert first.within(second) == inside


def test_value_sets() -> None:
    assert "a" in ValueSet.of(["a"]) and "b" not in ValueSet.of(["a"])
    assert None in ValueSet.all_but(["a"])
    assert (ValueSet.of(["a"]) & ValueSet.all_but(["a"])).empty
    assert not (ValueSet.all_but(["a"]) & ValueSet.all_but(["b"])).empty


class RefusingLabels:
    def labels_of(self, namespace: str) -> LabelLookup:
        raise AssertionError(f"looked up the labels of {namespace} for a pod without GPUs")


def test_a_pod_without_gpus_never_waits_on_namespace_labels(policy_set: PolicySet) -> None:
    from webhook.admission.decide import decide
    from webhook.admission.review import AdmissionRequest

    pod = {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "web"}]}}
    request = AdmissionRequest("uid", "", "v1", "Pod", "CREATE", "", "web", "web", pod, None, False)
    assert decide(request, policy_set, "mutate", RefusingLabels()).allowed
    assert policy_set.is_gpu_resource("nvidia.com/mig-1g.5gb")
    assert not policy_set.is_gpu_resource("memory")
