"""Loading policies from a directory: YAML, then the JSON Schema, then the checks a schema
cannot express. Every problem names the file, the line and the field; nothing half-loaded
is ever returned."""

from __future__ import annotations

import contextlib
import string
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from webhook.field_paths import FieldPath
from webhook.k8s_names import (
    extended_resource_problem,
    is_dns_subdomain,
    is_env_name,
    is_label_value,
    is_namespace_pattern,
    qualified_name_problem,
)
from webhook.policy.catalogue import (
    Catalogue,
    built_in_catalogue,
    catalogue_models,
    is_catalogue,
    model_from_entry,
    models_by_label,
    product_names,
)
from webhook.policy.defaults import (
    BUILT_IN_POLICY_NAME,
    DEFAULT_GOVERNED_RESOURCES,
    ENV_PLACEHOLDERS,
)
from webhook.policy.dra_settings import hami_core_problems, read_dra
from webhook.policy.frameworks import (
    BACKEND_HARD_LIMITS,
    DEFAULT_FRAMEWORKS,
    FRAMEWORK_ENV,
    hard_limit_env,
)
from webhook.policy.label_selectors import LabelSelector, ValueSet, requirement
from webhook.policy.model import (
    MIG_RESOURCE_PREFIX,
    Backend,
    Enforcement,
    EnvTemplate,
    FractionHandling,
    Framework,
    GovernedResource,
    GpuModel,
    HamiSettings,
    HardLimit,
    KaiSettings,
    MultiGpuNodes,
    NodePool,
    Placement,
    Policy,
    Sharing,
)
from webhook.policy.namespace_patterns import NamespacePatterns
from webhook.policy.overlaps import overlap_problems
from webhook.policy.problems import PolicyLoadError, PolicyProblem
from webhook.policy.schema_problems import schema_problems, schema_validator
from webhook.policy.scope import Scope
from webhook.policy.yaml_documents import DocumentError, SourceDocument, read_documents

SCHEMA_FILE = Path(__file__).with_name("gpupolicy-v1alpha1.schema.json")
POLICY_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def policy_files(directory: Path) -> list[Path]:
    """The policy files of a directory, in name order. Hidden entries are skipped, which also
    skips the `..data` folders of a mounted ConfigMap (its visible names are links into it)."""
    return sorted(
        path
        for path in directory.iterdir()
        if not path.name.startswith(".") and path.suffix in POLICY_FILE_SUFFIXES and path.is_file()
    )


def load_policy_directory(directory: Path) -> tuple[Policy, ...]:
    """Every policy in `directory`, with the directory's GPU model catalogue over the built-in
    one, or PolicyLoadError with every problem found."""
    if not directory.is_dir():
        raise PolicyLoadError(
            [PolicyProblem(str(directory), None, "(directory)", "not a directory")]
        )
    return load_policy_files(policy_files(directory), str(directory), "(directory)")


def load_policy_files(
    files: Sequence[Path], where: str, what: str = "(file)"
) -> tuple[Policy, ...]:
    """Every policy in `files`, read as one directory holding them (their own catalogue over
    the built-in one); `where`, `what`: how a problem of them all is told (none held)."""
    problems: list[PolicyProblem] = []
    documents: list[SourceDocument] = []
    for path in files:
        try:
            documents.extend(_read_file(path))
        except PolicyLoadError as error:
            problems.extend(error.problems)
    catalogue, found = catalogue_models(
        [document for document in documents if is_catalogue(document)], built_in_catalogue()
    )
    problems.extend(found)
    policies: list[Policy] = []
    for document in documents:
        if is_catalogue(document):
            continue
        try:
            policies.append(policy_from_document(document, catalogue))
        except PolicyLoadError as error:
            problems.extend(error.problems)
    if not policies and not problems:
        problems.append(PolicyProblem(where, None, what, "holds no policy documents"))
    problems.extend(_duplicate_names(policies))
    # Among the policies that did load: one run names every problem of the directory.
    problems.extend(overlap_problems(_first_of_each_name(policies)))
    if problems:
        raise PolicyLoadError(sorted(problems, key=lambda p: (p.file, p.line or 0)))
    return tuple(policies)


def _first_of_each_name(policies: list[Policy]) -> list[Policy]:
    return list({policy.name: policy for policy in reversed(policies)}.values())[::-1]


def _read_file(path: Path) -> list[SourceDocument]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyLoadError([PolicyProblem(str(path), None, "(file)", str(error))]) from None
    try:
        return read_documents(text, str(path))
    except DocumentError as error:
        raise PolicyLoadError([error.problem]) from None


def policy_from_document(document: SourceDocument, catalogue: Catalogue | None = None) -> Policy:
    """`catalogue`: the models a policy may name; the built-in catalogue where not given."""
    problems = schema_problems(document, schema_validator(SCHEMA_FILE))
    builder = _PolicyBuilder(document, catalogue or built_in_catalogue())
    if problems:
        raise PolicyLoadError([*problems, *_besides(problems, builder)])
    policy = builder.build()
    if builder.problems:
        raise PolicyLoadError(builder.problems)
    return policy


def _besides(schema: list[PolicyProblem], builder: _PolicyBuilder) -> list[PolicyProblem]:
    """The checks a schema cannot express, on a document the schema refused, so that one run
    reports every problem: those of the fields the schema did not fault. The builder expects a
    schema-valid document and may stop part-way on this one; what it found so far counts."""
    # What a document of the wrong shape makes the builder raise; any other error is a bug.
    with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError, IndexError):
        builder.build()
    faulted = [problem.field for problem in schema]
    return [
        problem
        for problem in builder.problems
        if not any(
            _within(problem.field, field) or _within(field, problem.field) for field in faulted
        )
    ]


def _within(field: str, parent: str) -> bool:
    return field == parent or field.startswith((f"{parent}.", f"{parent}["))


def _duplicate_names(policies: list[Policy]) -> Iterator[PolicyProblem]:
    first_source: dict[str, str] = {}
    for policy in policies:
        if policy.name in first_source:
            yield PolicyProblem(
                policy.source,
                None,
                "metadata.name",
                f"policy {policy.name!r} is already defined in {first_source[policy.name]}",
            )
        else:
            first_source[policy.name] = policy.source


class _PolicyBuilder:
    """Turns a schema-valid document into a Policy, collecting the semantic problems."""

    def __init__(self, document: SourceDocument, catalogue: Catalogue) -> None:
        self.document = document
        self.catalogue = catalogue
        self.problems: list[PolicyProblem] = []

    def report(self, path: FieldPath, message: str) -> None:
        self.problems.append(self.document.problem(path, message))

    def build(self) -> Policy:
        content: dict[str, Any] = self.document.content  # type: ignore[assignment]
        spec = content["spec"]
        resources = self._resources(spec)
        sharing = self._sharing(spec["sharing"], resources) if "sharing" in spec else None
        if sharing is None:
            for index, resource in enumerate(resources):
                if resource.fractions is FractionHandling.REWRITE:
                    self.report(
                        ("spec", "gpuResources", index, "fractions"),
                        "Rewrite needs spec.sharing (the VRAM resource and the GPU models)",
                    )
        name: str = content["metadata"]["name"]
        if name == BUILT_IN_POLICY_NAME:
            self.report(
                ("metadata", "name"),
                f"{name!r} is reserved for the rules that apply where no policy matches",
            )
        label = sharing.model_label if sharing is not None else Scope.model_label
        match = self._scope(spec.get("match", {}), ("spec", "match"), label)
        if sharing is not None and match.models is not None and not sharing.every_model:
            for index, entry in enumerate(spec["match"]["models"]):
                if entry in self.catalogue and entry not in sharing.models:
                    self.report(
                        ("spec", "match", "models", index),
                        f"{entry!r} is selected here, but spec.sharing.models cannot size it: "
                        "every share of it would be refused; list it in spec.sharing.models too",
                    )
        exclude = (
            self._scope(spec["exclude"], ("spec", "exclude"), label) if "exclude" in spec else None
        )
        if exclude is not None and match.within(exclude):
            self.report(("spec", "exclude"), "leaves out everything spec.match selects")
        return Policy(
            name=name,
            resources=resources,
            sharing=sharing,
            whole_gpu=self._placement(spec.get("wholeGPU", {}), ("spec", "wholeGPU")),
            source=self.document.file,
            source_line=self.document.line_of(("metadata", "name")),
            priority=spec.get("priority", 0),
            enforcement=Enforcement(spec.get("enforcement", Enforcement.ENFORCE.value)),
            match=match,
            exclude=exclude,
        )

    def _scope(self, block: Mapping[str, Any], base: FieldPath, model_label: str) -> Scope:
        namespaces = None
        if "namespaces" in block:
            patterns: list[str] = block["namespaces"]
            for index, pattern in enumerate(patterns):
                if not is_namespace_pattern(pattern):
                    self.report(
                        (*base, "namespaces", index),
                        f"{pattern!r} is neither a namespace name nor a glob of one "
                        "(lowercase letters, digits, '-', and the wildcards * and ?)",
                    )
            namespaces = NamespacePatterns(tuple(patterns))
        return Scope(
            namespaces=namespaces,
            namespace_selector=self._selector(block, (*base, "namespaceSelector")),
            object_selector=self._selector(block, (*base, "objectSelector")),
            models=self._selected_models(block, base),
            model_label=model_label,
        )

    def _selected_models(self, block: Mapping[str, Any], base: FieldPath) -> frozenset[str] | None:
        """The label values of the models a scope names: each model's product and aliases."""
        if "models" not in block:
            return None
        names: set[str] = set()
        for index, entry in enumerate(block["models"]):
            found = self.catalogue.get(entry)
            if found is None:
                self.report(
                    (*base, "models", index),
                    f"{entry!r} is not in the GPU model catalogue ({product_names(self.catalogue)})"
                    ": add it to a GPUModelCatalogue document beside the policies",
                )
                continue
            names.update((found.product, *found.aliases))
        return frozenset(names)

    def _selector(self, parent: Mapping[str, Any], path: FieldPath) -> LabelSelector | None:
        block = parent.get(str(path[-1]))
        if block is None:
            return None
        constraints: list[tuple[str, ValueSet]] = []
        for key, value in block.get("matchLabels", {}).items():
            self._check_label(path, ("matchLabels", key), key, [value])
            constraints.append((key, ValueSet.of([value])))
        for index, expression in enumerate(block.get("matchExpressions", [])):
            where = ("matchExpressions", index)
            operator = expression["operator"]
            values: list[str] = expression.get("values", [])
            if operator in ("In", "NotIn") and not values:
                self.report((*path, *where, "values"), f"operator {operator} needs values")
                continue
            if operator in ("Exists", "DoesNotExist") and values:
                self.report((*path, *where, "values"), f"operator {operator} takes no values")
            self._check_label(path, where, expression["key"], values)
            constraints.append((expression["key"], requirement(operator, values)))
        selector = LabelSelector.build(constraints)
        if selector.matches_nothing:
            self.report(path, "its requirements contradict each other: it matches nothing")
        return selector

    def _check_label(
        self, path: FieldPath, where: tuple[str | int, ...], key: str, values: list[str]
    ) -> None:
        problem = qualified_name_problem(key)
        if problem:
            self.report((*path, *where), f"label key {key!r}: {problem}")
        for value in values:
            if not is_label_value(value):
                self.report((*path, *where), f"{value!r} is not a valid label value")

    def _resources(self, spec: Mapping[str, Any]) -> tuple[GovernedResource, ...]:
        if "gpuResources" not in spec:
            return DEFAULT_GOVERNED_RESOURCES
        resources: list[GovernedResource] = []
        seen: set[str] = set()
        for index, entry in enumerate(spec["gpuResources"]):
            path = ("spec", "gpuResources", index)
            name: str = entry["name"]
            fractions = FractionHandling(entry.get("fractions", "Deny"))
            checked_name = name[:-1] + "x" if name.endswith("*") else name
            problem = extended_resource_problem(checked_name)
            if "*" in name[:-1]:
                problem = "only a trailing * is allowed (nvidia.com/mig-*)"
            if problem:
                self.report((*path, "name"), problem)
            if name in seen:
                self.report((*path, "name"), f"{name!r} is listed twice")
            seen.add(name)
            if fractions is FractionHandling.REWRITE and name.endswith("*"):
                self.report(
                    (*path, "fractions"),
                    "a resource family cannot be shared by memory: name one resource",
                )
            resources.append(GovernedResource(name, fractions))
        return tuple(resources)

    def _sharing(
        self, block: Mapping[str, Any], resources: tuple[GovernedResource, ...]
    ) -> Sharing:
        base = ("spec", "sharing")
        backend = Backend(block.get("backend", Backend.EXTENDED_RESOURCE.value))
        hami = self._hami(block.get("hami", {}), (*base, "hami"))
        vram_resource = self._vram_resource(block, backend, hami, resources)
        unit = block.get("unit", "GiB" if backend is Backend.GPUSHARE else "MiB")
        if backend is Backend.HAMI and unit != "MiB":
            self.report((*base, "unit"), f"HAMi counts {hami.memory_resource} in MiB: write MiB")
        kai = self._kai(block, backend, base)
        model_label: str = block.get("modelLabel", "nvidia.com/gpu.product")
        problem = qualified_name_problem(model_label)
        if problem:
            self.report((*base, "modelLabel"), problem)
        models = self._models(block, base)
        every_model = "models" not in block
        if backend is Backend.MIG:
            self._check_mig(models, resources, base)
        dra = read_dra(block, backend, models, self.report, base)
        default_model = block.get("defaultModel")
        if default_model is not None and default_model not in models:
            known = product_names(models)
            self.report((*base, "defaultModel"), f"{default_model!r} is not in models ({known})")
        placement = self._placement(block.get("placement", {}), (*base, "placement"))
        if model_label in placement.node_selector:
            self.report(
                (*base, "placement", "nodeSelector", model_label),
                "the model label is set from the pod's model; leave it out here",
            )
        hard_limit = self._hard_limit(block, backend, base)
        if dra is not None and hard_limit is HardLimit.HAMI_CORE:
            for problem in hami_core_problems(dra):
                self.report((*base, "hardLimit"), problem)
        frameworks = self._frameworks(block, base)
        env = self._all_env(block, hard_limit, frameworks, base)
        nodes = self._node_pool(block.get("nodes", {}), placement, (*base, "nodes"))
        runtime_class_name: str | None = block.get("runtimeClassName")
        if runtime_class_name is not None and not is_dns_subdomain(runtime_class_name):
            self.report(
                (*base, "runtimeClassName"),
                f"{runtime_class_name!r} is not a RuntimeClass name: a DNS subdomain (lowercase "
                "letters, digits, '-' and '.', alphanumeric at both ends, at most 253 characters)",
            )
        return Sharing(
            vram_resource=vram_resource,
            models=MappingProxyType(models),
            unit=unit,
            model_label=model_label,
            default_model=default_model,
            single_model_pool=block.get("singleModelPool", False),
            placement=placement,
            env=env,
            nodes=nodes,
            runtime_class_name=runtime_class_name,
            backend=backend,
            hami=hami,
            shared_resource=self._shared_resource(block, resources),
            kai=kai,
            dra=dra,
            hard_limit=hard_limit,
            frameworks=frameworks,
            every_model=every_model,
        )

    def _hard_limit(self, block: Mapping[str, Any], backend: Backend, base: FieldPath) -> HardLimit:
        allowed = BACKEND_HARD_LIMITS[backend]
        if "hardLimit" not in block:
            return allowed[0]
        hard_limit = HardLimit(block["hardLimit"])
        if hard_limit not in allowed:
            names = " or ".join(each.value for each in allowed)
            self.report(
                (*base, "hardLimit"),
                f"a {backend.value} pool's hard limit is {names}, not {hard_limit.value}",
            )
        return hard_limit

    def _frameworks(self, block: Mapping[str, Any], base: FieldPath) -> tuple[Framework, ...]:
        if "frameworks" not in block:
            return () if "env" in block else DEFAULT_FRAMEWORKS
        frameworks: list[Framework] = []
        for index, name in enumerate(block["frameworks"]):
            framework = Framework(name)
            if framework in frameworks:
                self.report((*base, "frameworks", index), f"{name!r} is listed twice")
            frameworks.append(framework)
        return tuple(frameworks)

    def _all_env(
        self,
        block: Mapping[str, Any],
        hard_limit: HardLimit,
        frameworks: tuple[Framework, ...],
        base: FieldPath,
    ) -> tuple[EnvTemplate, ...]:
        """The policy's own variables, then those of its frameworks and its hard limit; a
        variable of its own that one of those gives too is refused, naming which."""
        own = self._env(block.get("env", []), base)
        given: dict[str, str] = {}
        for framework in frameworks:
            for template in FRAMEWORK_ENV[framework]:
                given[template.name] = f"frameworks lists {framework.value}"
        generated = [t for framework in frameworks for t in FRAMEWORK_ENV[framework]]
        for template in hard_limit_env(hard_limit):
            given[template.name] = f"hardLimit is {hard_limit.value}"
            generated.append(template)
        for index, template in enumerate(own):
            if template.name in given:
                self.report(
                    (*base, "env", index, "name"),
                    f"{template.name} is given because {given[template.name]}: leave it out of env",
                )
        return (*own, *generated)

    def _vram_resource(
        self,
        block: Mapping[str, Any],
        backend: Backend,
        hami: HamiSettings,
        resources: tuple[GovernedResource, ...],
    ) -> str:
        path = ("spec", "sharing", "vramResource")
        vram_resource: str = block["vramResource"]
        problem = extended_resource_problem(vram_resource)
        if problem:
            self.report(path, problem)
        elif any(resource.matches(vram_resource) for resource in resources):
            self.report(path, "the VRAM resource cannot also be one of spec.gpuResources")
        elif backend is Backend.HAMI and vram_resource in (
            hami.count_resource,
            hami.percentage_resource,
            hami.cores_resource,
        ):
            self.report(path, "must not be one of HAMi's count, percentage or cores resources")
        return vram_resource

    def _shared_resource(
        self, block: Mapping[str, Any], resources: tuple[GovernedResource, ...]
    ) -> str:
        name: str = block.get("sharedResource", Sharing.shared_resource)
        path = ("spec", "sharing", "sharedResource")
        problem = extended_resource_problem(name)
        if problem:
            self.report(path, problem)
        elif any(resource.matches(name) for resource in resources):
            # Without renameByDefault a replica is nvidia.com/gpu: a share would read as a card.
            self.report(
                path,
                f"{name} is one of spec.gpuResources: a replica must have a name of its own "
                "(the device plugin's renameByDefault: true gives nvidia.com/gpu.shared)",
            )
        return name

    def _hami(self, block: Mapping[str, Any], path: FieldPath) -> HamiSettings:
        names = {
            "countResource": block.get("countResource", HamiSettings.count_resource),
            "memoryResource": block.get("memoryResource", HamiSettings.memory_resource),
            "percentageResource": block.get("percentageResource", HamiSettings.percentage_resource),
            "coresResource": block.get("coresResource", HamiSettings.cores_resource),
        }
        for key, name in names.items():
            problem = extended_resource_problem(name)
            if problem:
                self.report((*path, key), problem)
        if len(set(names.values())) < len(names):
            self.report(path, "HAMi's four resources must have four different names")
        return HamiSettings(
            count_resource=names["countResource"],
            memory_resource=names["memoryResource"],
            percentage_resource=names["percentageResource"],
            cores_resource=names["coresResource"],
            memory=block.get("memory", "MiB"),
            cores=block.get("cores", False),
            scheduler_name=block.get("schedulerName"),
        )

    def _kai(
        self, block: Mapping[str, Any], backend: Backend, base: FieldPath
    ) -> KaiSettings | None:
        settings = block.get("kai")
        if settings is None:
            if backend is Backend.KAI:
                self.report(base, "the KAI backend needs kai.queue, the queue pods are put in")
            return None
        if not is_label_value(settings["queue"]):
            self.report((*base, "kai", "queue"), f"{settings['queue']!r} is not a label value")
        scheduler = settings.get("schedulerName", KaiSettings.scheduler_name)
        return KaiSettings(settings["queue"], scheduler)

    def _check_mig(
        self,
        models: Mapping[str, GpuModel],
        resources: tuple[GovernedResource, ...],
        base: FieldPath,
    ) -> None:
        if not any(model.mig_profiles for model in models.values()):
            self.report((*base, "models"), "the MIG backend needs migProfiles on the models")
        if not any(r.is_family and MIG_RESOURCE_PREFIX.startswith(r.name[:-1]) for r in resources):
            self.report(
                ("spec", "gpuResources"),
                "the MIG backend gives nvidia.com/mig-<profile> devices: govern nvidia.com/mig-*",
            )

    def _node_pool(
        self, block: Mapping[str, Any], placement: Placement, path: FieldPath
    ) -> NodePool:
        selector = self._selector(block, (*path, "selector"))
        if selector is None and placement.node_selector:
            # Shared pods go only where the placement sends them, so that is the pool.
            selector = LabelSelector.build(
                (key, ValueSet.of([value])) for key, value in placement.node_selector.items()
            )
        return NodePool(selector, MultiGpuNodes(block.get("multiGPU", "Skip")))

    def _models(self, block: Mapping[str, Any], base: FieldPath) -> dict[str, GpuModel]:
        """The models of the pool, by product and alias: named from the catalogue or written
        whole; all of the catalogue's where the policy names none."""
        entries = block.get("models")
        if entries is None:
            return dict(self.catalogue)
        chosen: dict[str, GpuModel] = {}
        for index, entry in enumerate(entries):
            path: FieldPath = (*base, "models", index)
            if isinstance(entry, str):
                found = self.catalogue.get(entry)
                if found is None:
                    known = product_names(self.catalogue)
                    self.report(
                        path,
                        f"{entry!r} is not in the GPU model catalogue ({known}): write it here "
                        f"whole ({{product: {entry}, memoryMiB: <its nvidia.com/gpu.memory "
                        "label>}), or add it to a GPUModelCatalogue document beside the policies "
                        "(docs/gpu-models.md)",
                    )
                    continue
                model = found
            else:
                model = model_from_entry(entry, path, self.report)
                path = (*path, "product")
            if model.product in chosen:
                self.report(path, f"{model.product!r} is listed twice")
            chosen[model.product] = model
        return models_by_label(chosen.values())

    def _env(self, entries: list[Mapping[str, Any]], base: FieldPath) -> tuple[EnvTemplate, ...]:
        templates: list[EnvTemplate] = []
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            path = (*base, "env", index)
            name: str = entry["name"]
            if not is_env_name(name):
                self.report((*path, "name"), f"{name!r} is not a valid environment variable name")
            if name in seen:
                self.report((*path, "name"), f"{name!r} is listed twice")
            seen.add(name)
            problem = env_template_problem(entry["value"])
            if problem:
                self.report((*path, "value"), problem)
            unless_set = tuple(entry.get("unlessSet", ()))
            for position, other in enumerate(unless_set):
                if not is_env_name(other) or other == name:
                    self.report(
                        (*path, "unlessSet", position),
                        f"{other!r} must be the name of another environment variable",
                    )
            merge_key = None
            if "mergeInto" in entry:
                key, colon, rest = entry["value"].partition(":")
                if not colon or not key or "," in entry["value"] or ":" in rest:
                    self.report(
                        (*path, "value"),
                        "with mergeInto: KeyValueList the value is one key:value entry, "
                        'such as "per_process_memory_fraction:{fraction}"',
                    )
                merge_key = key
            templates.append(
                EnvTemplate(
                    name, entry["value"], entry.get("enforce", False), unless_set, merge_key
                )
            )
        return tuple(templates)

    def _placement(self, block: Mapping[str, Any], base: FieldPath) -> Placement:
        node_selector: dict[str, str] = dict(block.get("nodeSelector", {}))
        for key, value in node_selector.items():
            problem = qualified_name_problem(key)
            if problem:
                self.report((*base, "nodeSelector", key), problem)
            if not is_label_value(value):
                self.report((*base, "nodeSelector", key), f"{value!r} is not a valid label value")
        tolerations = tuple(block.get("tolerations", ()))
        for index, toleration in enumerate(tolerations):
            problem = toleration_problem(toleration)
            if problem:
                self.report((*base, "tolerations", index), problem)
        return Placement(
            resource_tolerations=block.get("resourceTolerations", True),
            tolerations=tuple(MappingProxyType(dict(t)) for t in tolerations),
            node_selector=MappingProxyType(node_selector),
        )


def env_template_problem(template: str) -> str | None:
    """Why `template` is not a valid env value template, or None."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        return f"bad template: {error} (write {{{{ and }}}} for literal braces)"
    known = ", ".join(f"{{{name}}}" for name in ENV_PLACEHOLDERS)
    for _, name, spec, conversion in parsed:
        if name is not None and (name not in ENV_PLACEHOLDERS or spec or conversion):
            return f"unknown placeholder {{{name}}} (known: {known})"
    return None


def toleration_problem(toleration: Mapping[str, Any]) -> str | None:
    operator = toleration.get("operator", "Equal")
    key = toleration.get("key")
    if key:
        problem = qualified_name_problem(key)
        if problem:
            return f"key {key!r}: {problem}"
    if operator == "Exists" and toleration.get("value"):
        return "a toleration with operator Exists must not have a value"
    if not toleration.get("key") and operator != "Exists":
        return "a toleration without a key must use operator Exists"
    if "tolerationSeconds" in toleration and toleration.get("effect") != "NoExecute":
        return "tolerationSeconds only applies to effect NoExecute"
    return None
