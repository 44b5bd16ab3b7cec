"""The GPU model catalogue: each card's memory, the driver's headroom, its MIG profiles and
the other spellings of its product label, shared by every policy of a directory.

A built-in catalogue (gpu-models.yaml beside this module) holds today's data-centre cards. A
`GPUModelCatalogue` document in the policy directory adds models or replaces built-in ones by
product; a policy then names the models its pool allows (`spec.sharing.models`), or takes
them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from webhook.field_paths import FieldPath
from webhook.k8s_names import is_label_value
from webhook.policy.model import GpuModel, MigProfile
from webhook.policy.problems import PolicyLoadError, PolicyProblem
from webhook.policy.schema_problems import schema_problems
from webhook.policy.yaml_documents import SourceDocument, read_documents

CATALOGUE_KIND = "GPUModelCatalogue"
BUILT_IN_FILE = Path(__file__).with_name("gpu-models.yaml")
_POLICY_SCHEMA = Path(__file__).with_name("gpupolicy-v1alpha1.schema.json")

Report = Callable[[FieldPath, str], None]
Catalogue = Mapping[str, GpuModel]


@cache
def catalogue_validator() -> jsonschema.protocols.Validator:
    """The catalogue's schema, built on the policy schema's own model entry."""
    policy = json.loads(_POLICY_SCHEMA.read_text(encoding="utf-8"))
    schema = {
        "$schema": policy["$schema"],
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": policy["properties"]["apiVersion"],
            "kind": {"const": CATALOGUE_KIND},
            "metadata": policy["properties"]["metadata"],
            "spec": {
                "type": "object",
                "additionalProperties": False,
                "required": ["models"],
                "properties": {
                    "models": {"type": "array", "items": {"$ref": "#/$defs/gpuModel"}},
                },
            },
        },
        "$defs": policy["$defs"],
    }
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def is_catalogue(document: SourceDocument) -> bool:
    content = document.content
    return isinstance(content, Mapping) and content.get("kind") == CATALOGUE_KIND


def model_from_entry(entry: Mapping[str, Any], path: FieldPath, report: Report) -> GpuModel:
    """One schema-valid model entry, as a policy or a catalogue writes it."""
    product: str = entry["product"]
    if not is_label_value(product):
        report((*path, "product"), f"{product!r} is not a valid label value")
    memory = entry["memoryMiB"]
    if not isinstance(memory, int):  # JSON Schema takes 15360.0 for an integer
        report((*path, "memoryMiB"), "must be a whole number of MiB")
        memory = int(memory)
    reserved = entry.get("reservedMiB", 0)
    if reserved >= memory:
        report((*path, "reservedMiB"), "must be less than memoryMiB")
        reserved = 0
    for index, alias in enumerate(entry.get("aliases", ())):
        if not is_label_value(alias):
            report((*path, "aliases", index), f"{alias!r} is not a valid label value")
    profiles = tuple(
        MigProfile(profile["name"], profile["memoryMiB"])
        for profile in entry.get("migProfiles", ())
    )
    return GpuModel(product, memory, reserved, profiles, tuple(entry.get("aliases", ())))


def models_by_label(models: Iterable[GpuModel]) -> dict[str, GpuModel]:
    """Each model under its product and under each of its aliases."""
    found: dict[str, GpuModel] = {}
    for model in models:
        for name in (model.product, *model.aliases):
            found.setdefault(name, model)
    return found


def catalogue_models(
    documents: Iterable[SourceDocument], base: Catalogue
) -> tuple[dict[str, GpuModel], list[PolicyProblem]]:
    """`base` with the models of these catalogue documents added or put in its place, by
    product; a product listed twice across them is a problem."""
    models = {model.product: model for model in base.values()}
    seen: dict[str, str] = {}
    problems: list[PolicyProblem] = []
    for document in documents:
        found = schema_problems(document, catalogue_validator())
        if found:
            problems.extend(found)
            continue

        def report(path: FieldPath, message: str, document: SourceDocument = document) -> None:
            problems.append(document.problem(path, message))

        content: Any = document.content
        for index, entry in enumerate(content["spec"]["models"]):
            path: FieldPath = ("spec", "models", index)
            model = model_from_entry(entry, path, report)
            where = f"{document.file}:{document.line_of(path)}"
            if model.product in seen:
                report((*path, "product"), f"{model.product!r} is listed in {seen[model.product]}")
            seen[model.product] = where
            models[model.product] = model
    return models_by_label(models.values()), problems


def product_names(models: Mapping[str, GpuModel]) -> str:
    """The products of models held by product and alias, once each, for messages."""
    return ", ".join(dict.fromkeys(model.product for model in models.values()))


@cache
def built_in_catalogue() -> Catalogue:
    documents = read_documents(BUILT_IN_FILE.read_text(encoding="utf-8"), str(BUILT_IN_FILE))
    models, problems = catalogue_models(documents, {})
    if problems:
        raise PolicyLoadError(problems)
    return models
