"""The naming rules of the Kubernetes API that policies and pods must follow."""

from __future__ import annotations

import re

_NAME_PART = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_NAMESPACE_PATTERN = re.compile(r"[a-z0-9*?]([-a-z0-9*?]*[a-z0-9*?])?")
_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")


def is_dns_subdomain(text: str) -> bool:
    return len(text) <= 253 and _DNS_SUBDOMAIN.fullmatch(text) is not None


def qualified_name_problem(text: str) -> str | None:
    """Why `text` is not a qualified name (`[prefix/]name`, as label keys are), or None."""
    prefix, slash, name = text.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return f"the prefix {prefix!r} is not a DNS subdomain"
    if len(name) > 63 or _NAME_PART.fullmatch(name) is None:
        return (
            f"the name {name!r} must be 1-63 characters, alphanumeric at both ends, "
            "with '-', '_' and '.' between"
        )
    return None


def extended_resource_problem(text: str) -> str | None:
    """Why `text` cannot name an extended resource, or None. Extended resources are
    domain-prefixed and live outside the kubernetes.io domain."""
    problem = qualified_name_problem(text)
    if problem:
        return problem
    if "/" not in text:
        return "an extended resource name needs a domain prefix, such as example.com/vram"
    if "kubernetes.io/" in text:
        # The apiserver treats any name containing "kubernetes.io/" as a native resource.
        return "the kubernetes.io domain is reserved for Kubernetes' own resources"
    if text.startswith("requests."):
        return "the 'requests.' prefix is reserved for resource quota"
    return None


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and _LABEL_VALUE.fullmatch(text) is not None


def is_env_name(text: str) -> bool:
    return _ENV_NAME.fullmatch(text) is not None


def is_namespace_pattern(text: str) -> bool:
    """A namespace name (a DNS label), in which * and ? may stand for characters."""
    return len(text) <= 63 and _NAMESPACE_PATTERN.fullmatch(text) is not None
