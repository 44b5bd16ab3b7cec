"""The loaded policies, and the one that governs an object.

Policies are tried from the highest `spec.priority` down, and by name within a priority;
the loader refuses two policies of one priority that could match the same object, so the
order by name never decides anything and file order never matters. An object no policy
matches is governed by the built-in policy: every GPU rule enforced, no fraction shared.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from webhook.bounded_cache import BoundedMemo
from webhook.policy.defaults import BUILT_IN_POLICY_NAME, DEFAULT_GOVERNED_RESOURCES
from webhook.policy.loader import load_policy_directory
from webhook.policy.model import Policy
from webhook.policy.namespace_labels import LabelLookup, NamespaceLabelSource
from webhook.policy.scope import AdmissionTarget, Match, ModelsNamed, no_models_named
from webhook.warning_text import one_line_warning

BUILT_IN_POLICY = Policy(name=BUILT_IN_POLICY_NAME, resources=DEFAULT_GOVERNED_RESOURCES)
# Namespaces whose candidate policies are remembered; a miss costs one pass over the globs.
CANDIDATES_MEMO_ENTRIES = 4096
# Resource names remembered; names beyond these are worked out each time.
RESOURCE_VERDICT_ENTRIES = 1024


class _GpuResourceVerdicts(dict[str, bool]):
    """Whether a resource name is a GPU resource, remembered for the few names pods ask for
    (cpu, memory): asked of every resource of every pod, a dict lookup answers in C."""

    def __init__(self, names: frozenset[str], prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.names = names
        self.prefixes = prefixes

    def __missing__(self, name: str) -> bool:
        verdict = name in self.names or name.startswith(self.prefixes)
        if len(self) < RESOURCE_VERDICT_ENTRIES:
            self[name] = verdict
        return verdict


@dataclass(slots=True)
class Selection:
    """The governing policy, and the policies passed over because they select namespaces by
    label and the namespace's labels are unknown (`unknown_because` says why)."""

    policy: Policy
    skipped: tuple[Policy, ...] = ()
    unknown_because: str = ""

    def warnings(self, namespace: str) -> tuple[str, ...]:
        if not self.skipped:
            return ()
        names = ", ".join(f'"{policy.name}"' for policy in self.skipped)
        # The reason goes last: a long one is cut, the policy names never are.
        return (
            one_line_warning(
                f'policy "{self.policy.name}" applied; skipped {names}: labels of namespace '
                f'"{namespace}" unknown ({self.unknown_because})'
            ),
        )


@dataclass(frozen=True)
class PolicySet:
    policies: tuple[Policy, ...]
    fallback: Policy = BUILT_IN_POLICY
    # Whether any policy here, or the built-in one, governs a resource name (as a GPU resource
    # or as its VRAM): an object that asks for none of these needs no policy chosen at all.
    is_gpu_resource: Callable[[str], bool] = field(init=False, repr=False, compare=False)
    _by_namespace: Mapping[str, tuple[Policy, ...]] = field(init=False, repr=False, compare=False)
    _broad: tuple[Policy, ...] = field(init=False, repr=False, compare=False)
    _rank: Mapping[int, int] = field(init=False, repr=False, compare=False)
    # Whether any policy here selects namespaces by label, so that labels must be looked up.
    needs_namespace_labels: bool = field(init=False, repr=False, compare=False)
    # Whether a policy selects by GPU model: only then is a pod's model read for selection.
    selects_by_model: bool = field(init=False, repr=False, compare=False)
    # Whether a policy's backend reads the cluster's nodes (MIG: the profiles they advertise).
    reads_nodes: bool = field(init=False, repr=False, compare=False)
    # Whether a policy's backend gives shares as DRA claims, whose templates the server makes.
    makes_claim_templates: bool = field(init=False, repr=False, compare=False)
    _candidates_memo: BoundedMemo[str, tuple[Policy, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        ranked = tuple(sorted(self.policies, key=lambda p: (-p.priority, p.name)))
        by_namespace, broad = _split_by_exact_namespaces(ranked)
        every = (*self.policies, self.fallback)
        resources = [resource for policy in every for resource in policy.resources]
        vram = {
            name for policy in every if policy.sharing for name in policy.sharing.share_resources
        }
        names = {resource.name for resource in resources if not resource.is_family}
        prefixes = {resource.name[:-1] for resource in resources if resource.is_family}
        verdicts = _GpuResourceVerdicts(frozenset(names | vram), tuple(sorted(prefixes)))
        object.__setattr__(self, "is_gpu_resource", verdicts.__getitem__)
        object.__setattr__(self, "_rank", {id(p): i for i, p in enumerate(ranked)})
        object.__setattr__(
            self, "_by_namespace", {name: tuple(found) for name, found in by_namespace.items()}
        )
        object.__setattr__(self, "_broad", tuple(broad))
        needs_labels = any(policy.needs_namespace_labels for policy in self.policies)
        object.__setattr__(self, "needs_namespace_labels", needs_labels)
        by_model = any(
            scope.models is not None
            for policy in self.policies
            for scope in (policy.match, policy.exclude)
            if scope is not None
        )
        object.__setattr__(self, "selects_by_model", by_model)
        reads_nodes = any(p.sharing is not None and p.sharing.reads_nodes for p in self.policies)
        object.__setattr__(self, "reads_nodes", reads_nodes)
        claims = any(p.sharing is not None and p.sharing.dra is not None for p in self.policies)
        object.__setattr__(self, "makes_claim_templates", claims)
        object.__setattr__(self, "_candidates_memo", BoundedMemo(CANDIDATES_MEMO_ENTRIES))

    @classmethod
    def load(cls, directory: Path) -> PolicySet:
        return cls(load_policy_directory(directory))

    def select(
        self,
        namespace: str,
        object_labels: Mapping[str, str],
        namespace_labels: NamespaceLabelSource,
        models_named: ModelsNamed | None = None,
    ) -> Selection:
        """The policy that governs an object with `object_labels` in `namespace`, which names
        the GPU models `models_named` reads (for policies that select by model). Namespace
        labels are looked up only when a candidate policy selects by them."""
        models = models_named or no_models_named
        target = AdmissionTarget(namespace, None, object_labels, models)
        lookup: LabelLookup | None = None
        skipped: list[Policy] = []
        for policy in self._candidates(namespace):
            if policy.needs_namespace_labels and lookup is None:
                lookup = namespace_labels.labels_of(namespace)
                target = AdmissionTarget(namespace, lookup.labels, object_labels, models)
            verdict = policy.applies_to(target)
            if verdict is Match.YES:
                return self._selection(policy, skipped, lookup)
            if verdict is Match.UNKNOWN:
                skipped.append(policy)
        return self._selection(self.fallback, skipped, lookup)

    def _candidates(self, namespace: str) -> tuple[Policy, ...]:
        """The policies that could match an object in `namespace`, in the order they are
        tried: those naming it exactly, and the globs and unnamed ones that admit it."""
        found = self._candidates_memo.get(namespace)
        if found is None:
            named = self._by_namespace.get(namespace, ())
            broad = [policy for policy in self._broad if policy.may_apply_in(namespace)]
            rank = self._rank
            found = tuple(heapq.merge(named, broad, key=lambda p: rank[id(p)]))
            self._candidates_memo.put(namespace, found)
        return found

    @staticmethod
    def _selection(policy: Policy, skipped: list[Policy], lookup: LabelLookup | None) -> Selection:
        if not skipped:
            return Selection(policy)
        reason = lookup.unknown_because if lookup is not None else ""
        return Selection(policy, tuple(skipped), reason)


def _split_by_exact_namespaces(
    policies: Iterable[Policy],
) -> tuple[dict[str, list[Policy]], list[Policy]]:
    """The policies that name only exact namespaces, indexed by those names, and the rest
    (globs, or no names at all), each in the order given: a namespace's candidates are the
    ones indexed under its name and the rest that admit it."""
    by_name: dict[str, list[Policy]] = {}
    broad: list[Policy] = []
    for policy in policies:
        names = policy.match.namespaces
        if names is None or names.globs:
            broad.append(policy)
        else:
            for name in names.exact:
                by_name.setdefault(name, []).append(policy)
    return by_name, broad
