"""Namespace labels as the offline tools are given them."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.k8s_names import is_label_value, qualified_name_problem


def parse_label_list(text: str) -> dict[str, str]:
    """`team=ml,gpu-sharing=enabled` as a mapping. Raises ValueError saying what is wrong."""
    labels: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"{item!r} is not key=value")
        key, value = key.strip(), value.strip()
        if key in labels:
            raise ValueError(f"the label {key!r} is given twice")
        labels[key] = value
    problem = label_problem(labels)
    if problem:
        raise ValueError(problem)
    return labels


def label_problem(labels: Mapping[str, str]) -> str | None:
    """Why `labels` cannot be the labels of a Kubernetes object, or None."""
    for key, value in labels.items():
        problem = qualified_name_problem(key)
        if problem:
            return f"label key {key!r}: {problem}"
        if not is_label_value(value):
            return (
                f"label {key}={value!r}: a label value is at most 63 characters, "
                "alphanumeric at both ends, with '-', '_' and '.' between"
            )
    return None
