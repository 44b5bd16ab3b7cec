"""deploy/ as `kubectl kustomize` renders it: objects the Kubernetes schemas accept, carrying the
names, rules and settings that the server and its admission core rely on, NetworkPolicies that
admit and open only what each pod needs, and no finding of checkov's Kubernetes checks."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.kustomize import kustomize
from webhook.admission.decide import HANDLED_OPERATIONS
from webhook.engine.gpu_requests import mentions_gpu
from webhook.engine.pod_spec import MalformedObject, PodView, pod_labels
from webhook.engine.workloads import POD_TEMPLATE_LOCATIONS, pod_template_location
from webhook.policy.label_selectors import LabelSelector, requirement
from webhook.policy.loader import policy_files
from webhook.policy.namespace_labels import NoCluster
from webhook.policy.policy_set import PolicySet
from webhook.server.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPLOY = REPO_ROOT / "deploy"
POLICIES = REPO_ROOT / "policies"
SHIPPED_SCENARIOS = REPO_ROOT / "tests" / "scenarios" / "shipped"

BASE = "base"
SELF_SIGNED = "overlays/self-signed"
CERT_MANAGER = "overlays/cert-manager"
TARGETS = (BASE, SELF_SIGNED, CERT_MANAGER)
# The oldest Kubernetes that applies matchConditions by default, and the version of the
# kube-apiserver that the reviews in tests/scenarios/shipped were captured from.
SCHEMA_VERSIONS = ("1.28.0", "1.36.0")

NAMESPACE = "gpu-admission"
NAME = "gpu-admission-webhook"
TLS_SECRET = "gpu-admission-webhook-tls"
POLICY_CONFIGMAP = "gpu-admission-policies"
CERTS = "gpu-admission-webhook-certs"
ADVERTISER = "gpu-vram-advertiser"
ADVERTISER_EVENTS = "gpu-vram-advertiser-events"
# The Lease the advertiser's replicas elect their leader with, in their own namespace.
ADVERTISER_LEASE = "gpu-vram-advertiser"
# Events about a cluster-scoped object (a Node) belong in this namespace.
EVENTS_NAMESPACE = "default"
ADVERTISE_COMMAND = ["python", "-m", "webhook", "advertise"]
# The sweep of the DRA shares' ResourceClaimTemplates: a CronJob and what it may do.
SWEEP = "gpu-claim-template-sweep"
SWEEP_COMMAND = ["python", "-m", "webhook", "sweep-claim-templates"]
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
CERT_MANAGER_GROUP = "cert-manager.io"
# The server sets this one itself, under STATE_DIR (webhook/server/gunicorn_conf.py).
SERVER_SET_VARIABLES = {"PROMETHEUS_MULTIPROC_DIR"}

# The resource each kind of webhook/engine/workloads.py is served as.
RESOURCES = {
    ("", "Pod"): "pods",
    ("", "PodTemplate"): "podtemplates",
    ("", "ReplicationController"): "replicationcontrollers",
    ("apps", "Deployment"): "deployments",
    ("apps", "StatefulSet"): "statefulsets",
    ("apps", "DaemonSet"): "daemonsets",
    ("apps", "ReplicaSet"): "replicasets",
    ("batch", "Job"): "jobs",
    ("batch", "CronJob"): "cronjobs",
}

Manifest = dict[str, Any]


def parse(text: str) -> tuple[Manifest, ...]:
    return tuple(document for document in yaml.safe_load_all(text) if document)


@cache
def rendered_text(target: str) -> str:
    return kustomize(DEPLOY / target)


@cache
def rendered(target: str) -> tuple[Manifest, ...]:
    return parse(rendered_text(target))


def find(target: str, kind: str, name: str) -> Manifest:
    found = [o for o in rendered(target) if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"deploy/{target} holds {len(found)} {kind} named {name}"
    return found[0]


def group_of(manifest: Manifest) -> str:
    api_version: str = manifest["apiVersion"]
    return api_version.rpartition("/")[0]


def describe(manifest: Manifest) -> str:
    return f"{manifest['kind']}/{manifest['metadata']['name']}"


def pod_spec_of(target: str, kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = find(target, kind, name)["spec"]["template"]["spec"]
    return spec


def only_container(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    containers = pod_spec["containers"]
    assert len(containers) == 1 and not pod_spec.get("initContainers")
    container: dict[str, Any] = containers[0]
    return container


def selector_of(label_selector: Mapping[str, Any]) -> LabelSelector:
    constraints = [
        (key, requirement("In", [value]))
        for key, value in label_selector.get("matchLabels", {}).items()
    ]
    constraints += [
        (expression["key"], requirement(expression["operator"], expression.get("values", [])))
        for expression in label_selector.get("matchExpressions", [])
    ]
    return LabelSelector.build(constraints)


def webhooks(target: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in WEBHOOK_KINDS:
        for webhook in find(target, kind, NAME)["webhooks"]:
            yield kind, webhook


# --- every object -------------------------------------------------------------------------


BASE_OBJECTS = {
    ("Namespace", NAMESPACE),
    ("ServiceAccount", NAME),
    ("ClusterRole", NAME),
    ("ClusterRoleBinding", NAME),
    ("ConfigMap", POLICY_CONFIGMAP),
    ("Service", NAME),
    ("Deployment", NAME),
    ("PodDisruptionBudget", NAME),
    ("MutatingWebhookConfiguration", NAME),
    ("ValidatingWebhookConfiguration", NAME),
    ("ServiceAccount", ADVERTISER),
    ("ClusterRole", ADVERTISER),
    ("ClusterRoleBinding", ADVERTISER),
    ("Role", ADVERTISER),
    ("RoleBinding", ADVERTISER),
    ("Role", ADVERTISER_EVENTS),
    ("RoleBinding", ADVERTISER_EVENTS),
    ("Deployment", ADVERTISER),
    ("NetworkPolicy", NAME),
    ("NetworkPolicy", ADVERTISER),
    ("ServiceAccount", SWEEP),
    ("ClusterRole", SWEEP),
    ("ClusterRoleBinding", SWEEP),
    ("CronJob", SWEEP),
    ("NetworkPolicy", SWEEP),
}
OBJECTS = {
    BASE: BASE_OBJECTS,
    SELF_SIGNED: BASE_OBJECTS
    | {
        ("ServiceAccount", CERTS),
        ("Role", CERTS),
        ("RoleBinding", CERTS),
        ("ClusterRole", CERTS),
        ("ClusterRoleBinding", CERTS),
        ("Job", CERTS),
        ("CronJob", CERTS),
        ("NetworkPolicy", CERTS),
    },
    CERT_MANAGER: BASE_OBJECTS
    | {
        ("Issuer", "gpu-admission-selfsigned"),
        ("Certificate", "gpu-admission-ca"),
        ("Issuer", "gpu-admission-ca"),
        ("Certificate", NAME),
    },
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", *WEBHOOK_KINDS}
# Namespaced objects outside NAMESPACE.
ELSEWHERE = {
    ("Role", ADVERTISER_EVENTS): EVENTS_NAMESPACE,
    ("RoleBinding", ADVERTISER_EVENTS): EVENTS_NAMESPACE,
}


@pytest.mark.parametrize("target", TARGETS)
def test_each_build_holds_its_objects_in_the_namespace(target: str) -> None:
    objects = rendered(target)
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} == OBJECTS[target]
    assert len(objects) == len(OBJECTS[target]), "an object appears twice"
    for manifest in objects:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        namespace = manifest["metadata"].get("namespace")
        expected = None if kind in CLUSTER_SCOPED else ELSEWHERE.get((kind, name), NAMESPACE)
        assert namespace == expected, describe(manifest)
        labels = manifest["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] in (NAME, CERTS, ADVERTISER, SWEEP), describe(
            manifest
        )
        if name in (ADVERTISER, ADVERTISER_EVENTS):
            # The base's labels name everything gpu-admission-webhook; its replacements give
            # the advertiser's and the sweep's objects their own name back.
            assert labels["app.kubernetes.io/name"] == ADVERTISER, describe(manifest)
        if name == SWEEP:
            assert labels["app.kubernetes.io/name"] == SWEEP, describe(manifest)
        assert labels["app.kubernetes.io/part-of"] == NAME, describe(manifest)


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("target", TARGETS)
def test_core_objects_match_the_kubernetes_schemas_strictly(target: str, version: str) -> None:
    # cert-manager's kinds are custom resources: they are not among these schemas, and are
    # checked on their own below.
    for manifest in rendered(target):
        if group_of(manifest) == CERT_MANAGER_GROUP:
            continue
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = ".".join(str(part) for part in error.path)
            pytest.fail(f"{describe(manifest)} in Kubernetes {version}: {where}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            pytest.fail(error.message)


# --- the webhook configurations -----------------------------------------------------------


def expected_rules() -> dict[tuple[str, str], set[str]]:
    missing = set(POD_TEMPLATE_LOCATIONS) - set(RESOURCES)
    assert not missing, (
        f"add the resource of {missing} to RESOURCES and to deploy/base/webhooks.yaml"
    )
    return {
        # Pods are judged when created only: decide() lets their UPDATEs pass at once.
        (group, RESOURCES[group, kind]): {"CREATE"} if location.is_pod else set(HANDLED_OPERATIONS)
        for (group, kind), location in POD_TEMPLATE_LOCATIONS.items()
    }


@pytest.mark.parametrize("target", TARGETS)
def test_rules_send_exactly_the_kinds_and_operations_the_core_handles(target: str) -> None:
    for kind, webhook in webhooks(target):
        sent: dict[tuple[str, str], set[str]] = {}
        for rule in webhook["rules"]:
            assert rule["apiVersions"] == ["v1"], f"{kind}: {rule}"
            assert rule["scope"] == "Namespaced", f"{kind}: {rule}"
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    assert (group, resource) not in sent, f"{kind}: {resource} appears twice"
                    sent[group, resource] = set(rule["operations"])
        assert sent == expected_rules(), kind


# The mutating webhook makes the ResourceClaimTemplates of DRA shares, never on a dry run
# (webhook/kube/claim_templates.py); the validating one writes nothing.
SIDE_EFFECTS = {
    "MutatingWebhookConfiguration": "NoneOnDryRun",
    "ValidatingWebhookConfiguration": "None",
}


@pytest.mark.parametrize("target", TARGETS)
def test_webhooks_answer_in_time_with_side_effects_only_off_dry_run(target: str) -> None:
    paths = {
        "MutatingWebhookConfiguration": "/mutate",
        "ValidatingWebhookConfiguration": "/validate",
    }
    for kind, webhook in webhooks(target):
        assert "v1" in webhook["admissionReviewVersions"], kind
        assert webhook["sideEffects"] == SIDE_EFFECTS[kind], kind
        assert webhook["timeoutSeconds"] < 30, kind
        assert webhook["failurePolicy"] == "Fail", kind
        assert webhook["matchPolicy"] == "Equivalent", kind
        service = webhook["clientConfig"]["service"]
        assert service == {"namespace": NAMESPACE, "name": NAME, "path": paths[kind], "port": 443}
        # Filled in the cluster; an apply that named it would wipe what was filled.
        assert "caBundle" not in webhook["clientConfig"], kind
    mutating = find(target, "MutatingWebhookConfiguration", NAME)["webhooks"]
    assert [webhook["reinvocationPolicy"] for webhook in mutating] == ["IfNeeded"]


@pytest.mark.parametrize("target", TARGETS)
def test_both_configurations_select_the_same_objects(target: str) -> None:
    def selection(kind: str) -> list[Any]:
        return [
            (webhook["rules"], webhook["namespaceSelector"], webhook["matchConditions"])
            for webhook in find(target, kind, NAME)["webhooks"]
        ]

    assert selection(WEBHOOK_KINDS[0]) == selection(WEBHOOK_KINDS[1])


@pytest.mark.parametrize(
    ("labels", "sent"),
    [
        ({"kubernetes.io/metadata.name": "ml-team"}, True),
        ({"kubernetes.io/metadata.name": "kube-system"}, False),
        ({"kubernetes.io/metadata.name": NAMESPACE}, False),
        (
            {"kubernetes.io/metadata.name": "ml", "gpu-admission.example.com/webhook": "disabled"},
            False,
        ),
        (
            {"kubernetes.io/metadata.name": "ml", "gpu-admission.example.com/webhook": "enabled"},
            True,
        ),
    ],
    ids=["other", "kube-system", "own-namespace", "opted-out", "opt-out-label-other-value"],
)
def test_namespace_selector(labels: dict[str, str], sent: bool) -> None:
    for kind, webhook in webhooks(BASE):
        assert selector_of(webhook["namespaceSelector"]).matches(labels) is sent, kind


# --- the server's Deployment --------------------------------------------------------------


class _RecordingEnviron(dict[str, str]):
    """An environment that remembers which variables were looked up."""

    def __init__(self, values: Mapping[str, str]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.read.add(key)
        return super().__getitem__(key)


def test_deployment_env_is_what_the_server_reads() -> None:
    container = only_container(pod_spec_of(BASE, "Deployment", NAME))
    env = {variable["name"]: variable["value"] for variable in container["env"]}
    assert len(env) == len(container["env"]), "a variable is set twice"
    environ = _RecordingEnviron(env)
    settings = Settings.from_environ(environ)
    assert set(env) <= environ.read, f"the server never reads {set(env) - environ.read}"
    assert not set(env) & SERVER_SET_VARIABLES
    assert settings.bind == "0.0.0.0:8443"
    assert settings.namespace_labels == "in-cluster"
    assert settings.policy_dir == Path("/etc/gpu-admission/policies")
    assert settings.cert_file == Path("/etc/gpu-admission/tls/tls.crt")
    assert settings.key_file == Path("/etc/gpu-admission/tls/tls.key")
    assert settings.state_dir == Path("/var/run/gpu-admission")
    assert settings.metrics_bind == "0.0.0.0:9102"
    assert [port["containerPort"] for port in container["ports"]] == [8443, 9102]


def test_deployment_mounts_what_the_settings_name() -> None:
    pod_spec = pod_spec_of(BASE, "Deployment", NAME)
    container = only_container(pod_spec)
    settings = Settings.from_environ({v["name"]: v["value"] for v in container["env"]})
    volumes = {volume["name"]: volume for volume in pod_spec["volumes"]}
    mounts = {Path(mount["mountPath"]): mount for mount in container["volumeMounts"]}
    # Directories, never subPath: kubelet's ..data swap must reach the policy reload.
    assert all("subPath" not in mount and "subPathExpr" not in mount for mount in mounts.values())

    def volume_at(path: Path) -> dict[str, Any]:
        assert path in mounts, f"nothing is mounted at {path}"
        volume: dict[str, Any] = volumes[mounts[path]["name"]]
        return volume

    assert volume_at(settings.policy_dir)["configMap"]["name"] == POLICY_CONFIGMAP
    assert settings.cert_file.parent == settings.key_file.parent
    assert volume_at(settings.cert_file.parent)["secret"]["secretName"] == TLS_SECRET
    assert (settings.cert_file.name, settings.key_file.name) == ("tls.crt", "tls.key")
    assert settings.state_dir is not None
    assert "emptyDir" in volume_at(settings.state_dir)
    # gunicorn writes its worker heartbeat files under the temporary directory.
    assert "emptyDir" in volume_at(Path("/tmp"))
    for path in (settings.policy_dir, settings.cert_file.parent):
        assert mounts[path].get("readOnly") is True


def test_probes_ask_the_server_over_https() -> None:
    container = only_container(pod_spec_of(BASE, "Deployment", NAME))
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get == {"path": path, "port": 8443, "scheme": "HTTPS"}, probe


def assert_hardened(pod_spec: Mapping[str, Any], where: str) -> None:
    pod = pod_spec["securityContext"]
    assert pod["runAsNonRoot"] is True, where
    assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
    for container in (*pod_spec.get("initContainers", ()), *pod_spec["containers"]):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, where
        assert context["readOnlyRootFilesystem"] is True, where
        assert context["capabilities"] == {"drop": ["ALL"]}, where
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert context.get("runAsNonRoot", pod["runAsNonRoot"]) is True, where
        user = context.get("runAsUser", pod.get("runAsUser"))
        group = context.get("runAsGroup", pod.get("runAsGroup"))
        assert user == group == 65532, where
        assert "privileged" not in context, where
        resources = container["resources"]
        assert set(resources) == {"requests", "limits"}, where
        assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}
    assert "priorityClassName" not in pod_spec, where
    assert not pod_spec.get("hostNetwork") and not pod_spec.get("hostPID"), where


def test_the_server_and_the_certificate_job_run_hardened() -> None:
    assert_hardened(pod_spec_of(BASE, "Deployment", NAME), "Deployment")
    assert_hardened(pod_spec_of(SELF_SIGNED, "Job", CERTS), "Job")
    namespace_labels = find(BASE, "Namespace", NAMESPACE)["metadata"]["labels"]
    assert namespace_labels["pod-security.kubernetes.io/enforce"] == "restricted"
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert "USER 65532:65532" in dockerfile, "the image's user must be the manifests' runAsUser"


def test_two_replicas_spread_across_nodes_behind_the_service() -> None:
    deployment = find(BASE, "Deployment", NAME)
    template_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert template_labels["app.kubernetes.io/name"] == NAME
    assert deployment["spec"]["replicas"] == 2
    assert selector_of(deployment["spec"]["selector"]).matches(template_labels)
    pod_spec = deployment["spec"]["template"]["spec"]
    [spread] = pod_spec["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert (spread["maxSkew"], spread["whenUnsatisfiable"]) == (1, "ScheduleAnyway")
    assert selector_of(spread["labelSelector"]).matches(template_labels)
    budget = find(BASE, "PodDisruptionBudget", NAME)["spec"]
    assert budget["minAvailable"] == 1
    assert selector_of(budget["selector"]).matches(template_labels)
    service = find(BASE, "Service", NAME)["spec"]
    assert selector_of({"matchLabels": service["selector"]}).matches(template_labels)
    assert service["ports"] == [
        {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
        {"name": "metrics", "port": 9102, "targetPort": 9102, "protocol": "TCP"},
    ]
    # The certificate Job's pods must not count as webhook replicas.
    job_labels = find(SELF_SIGNED, "Job", CERTS)["spec"]["template"]["metadata"]["labels"]
    assert not selector_of(budget["selector"]).matches(job_labels)


def rules_of(
    manifest: Manifest,
) -> list[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    return sorted(
        (
            tuple(rule.get("apiGroups", ())),
            tuple(rule.get("resources", ())),
            tuple(rule.get("resourceNames", ())),
            tuple(sorted(rule["verbs"])),
        )
        for rule in manifest["rules"]
    )


def bound_roles(target: str, service_account: str) -> list[tuple[str, str]]:
    """The (kind, name) of every role bound to the service account."""
    bound = []
    for manifest in rendered(target):
        if manifest["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        for subject in manifest["subjects"]:
            if subject["kind"] == "ServiceAccount" and subject["name"] == service_account:
                assert subject["namespace"] == NAMESPACE
                bound.append((manifest["roleRef"]["kind"], manifest["roleRef"]["name"]))
    return sorted(bound)


@pytest.mark.parametrize("target", TARGETS)
def test_the_server_may_only_read_namespaces_and_nodes_and_make_claim_templates(
    target: str,
) -> None:
    assert pod_spec_of(target, "Deployment", NAME)["serviceAccountName"] == NAME
    assert bound_roles(target, NAME) == [("ClusterRole", NAME)]
    role = find(target, "ClusterRole", NAME)
    # Templates: made, and stamped with a merge patch; never listed or deleted (the sweep's).
    assert rules_of(role) == [
        (("",), ("namespaces", "nodes"), (), ("get", "list", "watch")),
        (("resource.k8s.io",), ("resourceclaimtemplates",), (), ("create", "patch")),
    ]


def test_the_certificate_job_may_only_touch_its_secret_and_the_two_configurations() -> None:
    assert bound_roles(SELF_SIGNED, CERTS) == [("ClusterRole", CERTS), ("Role", CERTS)]
    assert rules_of(find(SELF_SIGNED, "Role", CERTS)) == [
        (("",), ("secrets",), (), ("create",)),
        (("",), ("secrets",), (TLS_SECRET,), ("get", "update")),
    ]
    assert rules_of(find(SELF_SIGNED, "ClusterRole", CERTS)) == [
        (
            ("admissionregistration.k8s.io",),
            ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"),
            (NAME,),
            ("get", "patch"),
        )
    ]


def test_the_certificate_job_runs_the_cluster_command_of_the_server_image() -> None:
    job = find(SELF_SIGNED, "Job", CERTS)
    assert job["spec"]["ttlSecondsAfterFinished"] > 0
    renewal = find(SELF_SIGNED, "CronJob", CERTS)["spec"]
    assert renewal["concurrencyPolicy"] == "Forbid"
    assert renewal["jobTemplate"]["spec"]["template"] == job["spec"]["template"]
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == CERTS
    container = only_container(pod_spec)
    server = only_container(pod_spec_of(SELF_SIGNED, "Deployment", NAME))
    assert container["image"] == server["image"]
    assert container["command"] == [
        *("python", "-m", "webhook.certs", "cluster"),
        *("--namespace", NAMESPACE, "--service", NAME, "--secret", TLS_SECRET),
        *("--webhook-name", NAME, "--kube", "in-cluster"),
    ]


def test_cert_manager_issues_the_serving_certificate_and_injects_its_ca() -> None:
    # cert-manager's kinds are not in the Kubernetes schemas: check the fields its CRDs require
    # and that the chain self-signed issuer -> CA certificate -> CA issuer -> serving
    # certificate holds together.
    objects = [o for o in rendered(CERT_MANAGER) if group_of(o) == CERT_MANAGER_GROUP]
    for manifest in objects:
        assert manifest["apiVersion"] == "cert-manager.io/v1", describe(manifest)
        assert manifest["kind"] in ("Issuer", "Certificate"), describe(manifest)
    issuers = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Issuer"}
    certificates = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Certificate"}
    for name, spec in issuers.items():
        assert len(set(spec) & {"selfSigned", "ca", "acme", "vault", "venafi"}) == 1, name
    for name, spec in certificates.items():
        assert spec["secretName"] and spec["issuerRef"]["name"] in issuers, name
        assert spec["issuerRef"].get("kind", "Issuer") == "Issuer", name

    serving = certificates[NAME]
    assert serving["secretName"] == TLS_SECRET
    assert f"{NAME}.{NAMESPACE}.svc" in serving["dnsNames"]
    assert "server auth" in serving["usages"]
    ca_issuer = issuers[serving["issuerRef"]["name"]]
    ca_certificate = next(
        c for c in certificates.values() if c["secretName"] == ca_issuer["ca"]["secretName"]
    )
    assert ca_certificate["isCA"] is True
    assert "selfSigned" in issuers[ca_certificate["issuerRef"]["name"]]
    for kind in WEBHOOK_KINDS:
        annotations = find(CERT_MANAGER, kind, NAME)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{NAME}", kind


def test_the_policy_configmap_holds_exactly_the_repository_policies() -> None:
    configmap = find(BASE, "ConfigMap", POLICY_CONFIGMAP)
    expected = {path.name: path.read_text() for path in policy_files(POLICIES)}
    data = configmap["data"]
    assert sorted(data) == sorted(expected), (
        "policies/Kustomization must list exactly the policy files of policies/"
    )
    for name, text in expected.items():
        assert data[name] == text


# --- the VRAM advertiser ------------------------------------------------------------------


def command_options(container: Mapping[str, Any], expected: list[str]) -> dict[str, str]:
    """The options of a container's command line after `expected`, each a flag and its value."""
    command: list[str] = container["command"]
    assert command[: len(expected)] == expected
    assert "args" not in container
    options = command[len(expected) :]
    assert len(options) % 2 == 0 and all(flag.startswith("--") for flag in options[::2])
    pairs = dict(zip(options[::2], options[1::2], strict=True))
    assert len(pairs) == len(options) // 2, "an option appears twice"
    return pairs


def advertise_options(container: Mapping[str, Any]) -> dict[str, str]:
    """The options of the advertiser's command line, each a flag and its value."""
    return command_options(container, ADVERTISE_COMMAND)


@pytest.mark.parametrize("target", TARGETS)
def test_the_advertiser_may_only_patch_node_status_hold_its_lease_and_record_events(
    target: str,
) -> None:
    deployment = find(target, "Deployment", ADVERTISER)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == ADVERTISER
    assert bound_roles(target, ADVERTISER) == [
        ("ClusterRole", ADVERTISER),
        ("Role", ADVERTISER),
        ("Role", ADVERTISER_EVENTS),
    ]
    assert rules_of(find(target, "ClusterRole", ADVERTISER)) == [
        (("",), ("nodes",), (), ("get", "list", "watch")),
        (("",), ("nodes/status",), (), ("patch",)),
    ]
    # Kubernetes cannot limit `create` by name: it covers any Lease of the namespace.
    assert rules_of(find(target, "Role", ADVERTISER)) == [
        (("coordination.k8s.io",), ("leases",), (), ("create",)),
        (("coordination.k8s.io",), ("leases",), (ADVERTISER_LEASE,), ("get", "update")),
    ]
    assert rules_of(find(target, "Role", ADVERTISER_EVENTS)) == [
        (("",), ("events",), (), ("create",))
    ]
    # The Lease is sought in the pod's own namespace (POD_NAMESPACE), and a RoleBinding grants
    # only a Role of its own namespace.
    for name, namespace in (
        (ADVERTISER, deployment["metadata"]["namespace"]),
        (ADVERTISER_EVENTS, EVENTS_NAMESPACE),
    ):
        assert find(target, "Role", name)["metadata"]["namespace"] == namespace, name
        assert find(target, "RoleBinding", name)["metadata"]["namespace"] == namespace, name
    assert deployment["metadata"]["namespace"] == NAMESPACE


def test_the_advertiser_runs_the_advertise_command_on_the_mounted_policies() -> None:
    pod_spec = pod_spec_of(BASE, "Deployment", ADVERTISER)
    container = only_container(pod_spec)
    server = only_container(pod_spec_of(BASE, "Deployment", NAME))
    # The server's image, whose entry point is gunicorn: the command must be set.
    assert container["image"] == server["image"]
    options = advertise_options(container)
    assert set(options) == {"--policies", "--metrics-bind"}

    volumes = {volume["name"]: volume for volume in pod_spec["volumes"]}
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    # Directories, never subPath: kubelet's ..data swap must reach the advertiser.
    assert all("subPath" not in mount and "subPathExpr" not in mount for mount in mounts.values())
    policies = mounts[options["--policies"]]
    assert policies.get("readOnly") is True
    # Every file of the ConfigMap, so a new policy needs no edit here.
    assert volumes[policies["name"]]["configMap"] == {"name": POLICY_CONFIGMAP}
    # It serves no TLS: the webhook's Secret stays out of this pod.
    assert not any("secret" in volume or "projected" in volume for volume in volumes.values())

    host, _, port = options["--metrics-bind"].rpartition(":")
    # The kubelet probes the pod's address, not its loopback.
    assert host == "0.0.0.0"
    assert [(p["containerPort"], p["protocol"]) for p in container["ports"]] == [(int(port), "TCP")]
    for probe in ("readinessProbe", "livenessProbe"):
        # /healthz for both: a follower, which patches nothing, is ready too.
        get = container[probe]["httpGet"]
        assert get == {"path": "/healthz", "port": int(port), "scheme": "HTTP"}, probe

    # The replica's name in the Lease, and the namespace of the Lease, from the downward API.
    assert container["env"] == [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]


def test_the_advertise_command_accepts_the_flags_the_deployment_passes() -> None:
    container = only_container(pod_spec_of(BASE, "Deployment", ADVERTISER))
    flags = advertise_options(container)
    # The repository's interpreter in place of the image's `python`.
    result = subprocess.run(
        [sys.executable, *ADVERTISE_COMMAND[1:], "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for flag in flags:
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", result.stdout), flag


@pytest.mark.parametrize("target", TARGETS)
def test_the_advertiser_runs_hardened(target: str) -> None:
    pod_spec = pod_spec_of(target, "Deployment", ADVERTISER)
    assert_hardened(pod_spec, "advertiser Deployment")
    # It talks to the API: nodes, their status, its Lease and Events.
    assert pod_spec["automountServiceAccountToken"] is True


@pytest.mark.parametrize("target", TARGETS)
def test_two_advertiser_replicas_spread_apart_from_the_webhook_pods(target: str) -> None:
    advertiser = find(target, "Deployment", ADVERTISER)
    pod_labels = advertiser["spec"]["template"]["metadata"]["labels"]
    # The kustomization's labels reach object metadata only, never the pod template.
    assert pod_labels == {"app.kubernetes.io/name": ADVERTISER}
    assert advertiser["spec"]["replicas"] == 2
    # The Lease makes two at once safe: no Recreate, which would leave none for a while.
    assert advertiser["spec"]["strategy"]["type"] == "RollingUpdate"
    assert selector_of(advertiser["spec"]["selector"]).matches(pod_labels)
    [spread] = advertiser["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert (spread["maxSkew"], spread["whenUnsatisfiable"]) == (1, "ScheduleAnyway")
    assert selector_of(spread["labelSelector"]).matches(pod_labels)

    # The advertiser's pods must neither receive admission requests nor count as webhook
    # replicas in its budget, and neither Deployment may adopt the other's pods.
    webhook = find(target, "Deployment", NAME)
    webhook_pod_labels = webhook["spec"]["template"]["metadata"]["labels"]
    service = find(target, "Service", NAME)["spec"]
    budget = find(target, "PodDisruptionBudget", NAME)["spec"]
    [webhook_spread] = webhook["spec"]["template"]["spec"]["topologySpreadConstraints"]
    for selecting, selector in (
        ("Service", {"matchLabels": service["selector"]}),
        ("PodDisruptionBudget", budget["selector"]),
        ("Deployment", webhook["spec"]["selector"]),
        ("spread", webhook_spread["labelSelector"]),
    ):
        assert selector_of(selector).matches(webhook_pod_labels), selecting
        assert not selector_of(selector).matches(pod_labels), selecting
    assert not selector_of(advertiser["spec"]["selector"]).matches(webhook_pod_labels)
    assert not selector_of(spread["labelSelector"]).matches(webhook_pod_labels)


# --- the sweep of ResourceClaimTemplates -------------------------------------------------


def sweep_pod_spec(target: str) -> dict[str, Any]:
    cronjob = find(target, "CronJob", SWEEP)
    spec: dict[str, Any] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("target", TARGETS)
def test_the_sweep_may_only_list_what_it_reads_and_delete_templates(target: str) -> None:
    from webhook.cli.scan import SCANNED_KINDS
    from webhook.cli.template_sweep import TEMPLATES_PATH

    assert sweep_pod_spec(target)["serviceAccountName"] == SWEEP
    assert bound_roles(target, SWEEP) == [("ClusterRole", SWEEP)]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in find(target, "ClusterRole", SWEEP)["rules"]:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    # Each kind it reads, listed page by page, and the templates it lists and deletes.
    # Discovery (/api, /apis) is open to every authenticated user (system:discovery).
    parts = TEMPLATES_PATH.strip("/").split("/")
    expected = {(group, RESOURCES[group, kind]): {"list"} for group, kind in SCANNED_KINDS}
    expected[parts[1], parts[-1]] = {"list", "delete"}
    assert granted == expected


def test_the_sweep_runs_one_pass_every_ten_minutes_with_flags_the_command_accepts() -> None:
    from webhook.cli.main import build_parser
    from webhook.cli.template_sweep import MIN_GRACE_SECONDS

    cronjob = find(BASE, "CronJob", SWEEP)["spec"]
    assert cronjob["schedule"] == "*/10 * * * *"
    assert cronjob["concurrencyPolicy"] == "Forbid"
    job = cronjob["jobTemplate"]["spec"]
    # Over before the next pass is due; a failed pass is not retried but read again then.
    assert job["activeDeadlineSeconds"] < 600
    assert job["backoffLimit"] == 0
    pod_spec = job["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never"
    container = only_container(pod_spec)
    server = only_container(pod_spec_of(BASE, "Deployment", NAME))
    # The server's image, whose entry point is gunicorn: the command must be set.
    assert container["image"] == server["image"]
    options = command_options(container, SWEEP_COMMAND)
    assert options["--cluster"] == "in-cluster"
    assert float(options["--grace"]) >= MIN_GRACE_SECONDS
    args = build_parser().parse_args(container["command"][len(SWEEP_COMMAND) - 1 :])
    assert (args.command, args.dry_run) == ("sweep-claim-templates", False)
    # It judges templates by what names them: no policy, no Secret in its pod.
    volumes = pod_spec.get("volumes", [])
    assert all(set(volume) == {"name", "emptyDir"} for volume in volumes), volumes


@pytest.mark.parametrize("target", TARGETS)
def test_the_sweep_runs_hardened_apart_from_the_webhook_pods(target: str) -> None:
    pod_spec = sweep_pod_spec(target)
    assert_hardened(pod_spec, "sweep CronJob")
    # It talks to the API: templates, pods and workloads.
    assert pod_spec["automountServiceAccountToken"] is True
    labels = find(target, "CronJob", SWEEP)["spec"]["jobTemplate"]["spec"]["template"]["metadata"][
        "labels"
    ]
    assert labels == {"app.kubernetes.io/name": SWEEP}
    service = find(target, "Service", NAME)["spec"]
    budget = find(target, "PodDisruptionBudget", NAME)["spec"]
    for selecting, selector in (
        ("Service", {"matchLabels": service["selector"]}),
        ("PodDisruptionBudget", budget["selector"]),
        ("Deployment", find(target, "Deployment", NAME)["spec"]["selector"]),
    ):
        assert not selector_of(selector).matches(labels), selecting


# --- the NetworkPolicies ------------------------------------------------------------------

# The label the control plane sets on every namespace, its value the namespace's name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Where Prometheus runs in the base; overlays replace the value (README.md).
MONITORING_NAMESPACE = "monitoring"
INGRESS_AND_EGRESS = ["Ingress", "Egress"]
# spec.egress[0] of every policy: the kube-apiserver, by its usual ports and no address, which an
# overlay adds (deploy/base/networkpolicy.yaml says why).
APISERVER_EGRESS = {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
DNS_EGRESS = {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
# The policy that must select each workload's pods.
POLICY_OF_WORKLOAD = {
    ("Deployment", NAME): NAME,
    ("Deployment", ADVERTISER): ADVERTISER,
    ("Job", CERTS): CERTS,
    ("CronJob", CERTS): CERTS,
    ("CronJob", SWEEP): SWEEP,
}


def network_policies(target: str) -> dict[str, dict[str, Any]]:
    """Each NetworkPolicy's spec, by name."""
    return {
        o["metadata"]["name"]: o["spec"] for o in rendered(target) if o["kind"] == "NetworkPolicy"
    }


def workload_pod_labels(target: str) -> dict[tuple[str, str], dict[str, str]]:
    """The labels of the pods of every object of the build that makes pods, by (kind, name)."""
    labels = {}
    for manifest in rendered(target):
        location = pod_template_location(group_of(manifest), manifest["kind"])
        if location is not None:
            key = (manifest["kind"], manifest["metadata"]["name"])
            labels[key] = dict(pod_labels(manifest, location))
    return labels


@pytest.mark.parametrize("target", TARGETS)
def test_every_pod_is_isolated_by_exactly_the_policy_of_its_workload(target: str) -> None:
    policies = network_policies(target)
    workloads = workload_pod_labels(target)
    assert set(workloads) <= set(POLICY_OF_WORKLOAD), "a new workload needs its NetworkPolicy"
    for workload, labels in workloads.items():
        selecting = [
            name
            for name, spec in policies.items()
            if selector_of(spec["podSelector"]).matches(labels)
        ]
        assert selecting == [POLICY_OF_WORKLOAD[workload]], workload
    selected = {POLICY_OF_WORKLOAD[workload] for workload in workloads}
    assert set(policies) == selected, "a NetworkPolicy selects no pod of this build"
    for name, spec in policies.items():
        # Both directions isolated; an empty podSelector would select every pod of the namespace.
        assert spec["policyTypes"] == INGRESS_AND_EGRESS, name
        assert spec["podSelector"]["matchLabels"], name


@pytest.mark.parametrize("target", TARGETS)
def test_the_webhook_admits_its_port_from_anywhere_its_metrics_from_monitoring_only(
    target: str,
) -> None:
    spec = network_policies(target)[NAME]
    container = only_container(pod_spec_of(target, "Deployment", NAME))
    service = find(target, "Service", NAME)["spec"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert [p["targetPort"] for p in service["ports"]] == [ports["https"], ports["metrics"]]
    monitoring = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE}}
    }
    # No `from` on the admission port: any source, for the kube-apiserver's address is not
    # predictable. The plain-HTTP metrics port only from the monitoring namespace.
    assert spec["ingress"] == [
        {"ports": [{"port": ports["https"], "protocol": "TCP"}]},
        {"from": [monitoring], "ports": [{"port": ports["metrics"], "protocol": "TCP"}]},
    ]
    assert spec["egress"] == [APISERVER_EGRESS, DNS_EGRESS]


@pytest.mark.parametrize("target", TARGETS)
def test_the_advertiser_admits_its_metrics_port_from_the_monitoring_namespace_only(
    target: str,
) -> None:
    spec = network_policies(target)[ADVERTISER]
    container = only_container(pod_spec_of(target, "Deployment", ADVERTISER))
    port = int(advertise_options(container)["--metrics-bind"].rpartition(":")[2])
    monitoring = {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE}}
    }
    # One peer, a namespace selector alone (any pod of that namespace), and one port.
    assert spec["ingress"] == [{"from": [monitoring], "ports": [{"port": port, "protocol": "TCP"}]}]
    namespaces = selector_of(monitoring["namespaceSelector"])
    assert namespaces.matches({NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE})
    for other in (NAMESPACE, EVENTS_NAMESPACE, "kube-system", "ml-team"):
        assert not namespaces.matches({NAMESPACE_NAME_LABEL: other}), other
    # It resolves no names: the in-cluster client dials KUBERNETES_SERVICE_HOST.
    assert spec["egress"] == [APISERVER_EGRESS]


def test_the_certificate_job_admits_nothing_and_reaches_only_the_apiserver() -> None:
    spec = network_policies(SELF_SIGNED)[CERTS]
    assert spec.get("ingress", []) == []
    assert spec["egress"] == [APISERVER_EGRESS]


@pytest.mark.parametrize("target", TARGETS)
def test_the_template_sweep_admits_nothing_and_reaches_only_the_apiserver(target: str) -> None:
    spec = network_policies(target)[SWEEP]
    assert spec.get("ingress", []) == []
    # No DNS: the in-cluster client dials KUBERNETES_SERVICE_HOST, an address.
    assert spec["egress"] == [APISERVER_EGRESS]


# What README.md's "Install on a cluster" tells an installing overlay to add: the apiserver's
# addresses into every policy's egress[0], and another monitoring namespace.
NARROWING_PATCHES = """
patches:
  - target:
      kind: NetworkPolicy
    patch: |-
      - op: add
        path: /spec/egress/0/to
        value:
          - ipBlock: {cidr: 192.0.2.10/32}
          - ipBlock: {cidr: 10.96.0.1/32}
  - target:
      kind: NetworkPolicy
      name: gpu-vram-advertiser
    patch: |-
      - op: replace
        path: /spec/ingress/0/from/0/namespaceSelector/matchLabels/kubernetes.io~1metadata.name
        value: observability
"""


def test_an_overlay_narrows_the_apiserver_rule_of_every_policy_with_one_patch(
    tmp_path: Path,
) -> None:
    base = os.path.relpath(DEPLOY / SELF_SIGNED, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(f"resources:\n  - {base}\n{NARROWING_PATCHES}")
    narrowed = {
        o["metadata"]["name"]: o["spec"]
        for o in parse(kustomize(tmp_path))
        if o["kind"] == "NetworkPolicy"
    }
    shipped = network_policies(SELF_SIGNED)
    assert set(narrowed) == set(shipped)
    for name, spec in narrowed.items():
        expected = copy.deepcopy(shipped[name])
        expected["egress"][0]["to"] = [
            {"ipBlock": {"cidr": "192.0.2.10/32"}},
            {"ipBlock": {"cidr": "10.96.0.1/32"}},
        ]
        if name == ADVERTISER:
            peer = expected["ingress"][0]["from"][0]
            peer["namespaceSelector"]["matchLabels"][NAMESPACE_NAME_LABEL] = "observability"
        assert spec == expected, name


# --- checkov, the security lint -----------------------------------------------------------

# The Makefile's CHECKOV_VENV, where `make checkov` installs deploy/checkov/requirements.txt.
CHECKOV = REPO_ROOT / ".venv" / "checkov" / "bin" / "checkov"
# Offline, as checkov 3.3.30's source has it: --skip-download stops the download of guidelines
# and check id mappings from Prisma Cloud (checkov/main.py; BC_SKIP_MAPPING=TRUE is the same
# switch), and CKV_SKIP_PACKAGE_UPDATE_CHECK stops the query of pypi.org for a newer checkov that
# runs when checkov is imported (checkov/common/util/banner.py). With both, a run opens no
# network connection (checked with strace).
CHECKOV_ARGS = ("--framework", "kubernetes", "--skip-download", "--output", "json")
CHECKOV_ENVIRONMENT = {"CKV_SKIP_PACKAGE_UPDATE_CHECK": "true", "LANG": "C.UTF-8"}
# What checkov records for a skip annotation without `=reason`.
NO_REASON = "No comment provided"


@pytest.fixture(scope="module")
def checkov(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """checkov's Kubernetes checks run once over every build, each written to <target>.yaml."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed, so checkov's virtualenv cannot be made")
    builds = {target: rendered_text(target) for target in TARGETS}
    installed = subprocess.run(
        [make, "--no-print-directory", "-s", "checkov"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert installed.returncode == 0, f"make checkov:\n{installed.stdout}{installed.stderr}"
    # Its own directory, also as HOME: checkov reads .checkov.yaml from the working and home
    # directories, and CKV_ and BC_ variables, so none of the caller's settings come along.
    workdir = tmp_path_factory.mktemp("checkov")
    arguments = []
    for target, text in builds.items():
        (workdir / f"{Path(target).name}.yaml").write_text(text)
        arguments += ["--file", f"{Path(target).name}.yaml"]
    return subprocess.run(
        [str(CHECKOV), *CHECKOV_ARGS, *arguments],
        cwd=workdir,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(workdir), **CHECKOV_ENVIRONMENT},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_checkov_finds_nothing_in_any_build(checkov: subprocess.CompletedProcess[str]) -> None:
    try:
        report = json.loads(checkov.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov printed no report (exit {checkov.returncode}):\n{checkov.stderr}")
    assert report["check_type"] == "kubernetes", report
    assert report["summary"]["parsing_errors"] == 0, report["summary"]
    results = report["results"]
    findings = sorted(
        f"{r['file_path'].lstrip('/')}: {r['resource']}: {r['check_id']} {r['check_name']}"
        for r in results["failed_checks"]
    )
    assert not findings, (
        "checkov's findings: fix each in deploy/, or, where the check does not apply, skip it "
        "with an annotation `checkov.io/skipN: <check id>=<why>` on the object:\n"
        + "\n".join(findings)
    )
    assert checkov.returncode == 0, checkov.stderr
    # Every workload of every build was read and judged, so a clean report means something.
    judged = {
        (r["file_path"].lstrip("/"), r["resource"])
        for r in results["passed_checks"] + results["skipped_checks"]
    }
    for target in TARGETS:
        for kind, name in workload_pod_labels(target):
            resource = f"{kind}.{NAMESPACE}.{name}"
            assert (f"{Path(target).name}.yaml", resource) in judged, f"{target}: {resource}"
    for result in results["skipped_checks"]:
        reason = result["check_result"].get("suppress_comment", NO_REASON)
        assert reason.strip() and reason != NO_REASON, (
            f"{result['resource']}: the skip of {result['check_id']} gives no reason"
        )


# --- the matchConditions, evaluated by the CEL runtime -------------------------------------

SHIPPED_POLICIES = PolicySet.load(POLICIES)
Condition = Callable[[Mapping[str, Any]], bool]


@pytest.fixture(scope="module")
def match_conditions() -> dict[str, Condition]:
    """Each webhook's conditions, ANDed as the apiserver does, as a function of the request."""
    cel = pytest.importorskip("cel_expr_python.cel", reason="the CEL runtime is not installed")
    # The apiserver declares object and oldObject as dyn, and request as its AdmissionRequest type;
    # the expressions read only request.kind.kind from it, a string either way.
    environment = cel.NewEnv(
        variables={name: cel.Type.DYN for name in ("object", "oldObject", "request")}
    )
    conditions: dict[str, Condition] = {}
    for kind, webhook in webhooks(BASE):
        programs = []
        for condition in webhook["matchConditions"]:
            program = environment.compile(condition["expression"])
            assert program.return_type() == cel.Type.BOOL, condition["name"]
            programs.append((condition["name"], program))

        def evaluate(request: Mapping[str, Any], programs: list[Any] = programs) -> bool:
            data = {
                "object": request.get("object"),
                "oldObject": request.get("oldObject"),
                "request": request,
            }
            results = []
            for name, program in programs:
                value = program.eval(data=data)
                assert value.type() == cel.Type.BOOL, f"{name}: {value.plain_value()}"
                results.append(value.value())
            return all(results)

        conditions[kind] = evaluate
    return conditions


def is_sent_by_the_rules(request: Mapping[str, Any]) -> bool:
    location = pod_template_location(request["kind"]["group"], request["kind"]["kind"])
    if location is None or request.get("subResource"):
        return False
    return request["operation"] == "CREATE" or (
        request["operation"] in HANDLED_OPERATIONS and not location.is_pod
    )


def engine_sees_a_gpu(request: Mapping[str, Any]) -> bool:
    group, kind = request["kind"]["group"], request["kind"]["kind"]
    location = pod_template_location(group, kind)
    assert location is not None
    obj = request["object"]
    selection = SHIPPED_POLICIES.select(
        request.get("namespace", ""), pod_labels(obj, location), NoCluster()
    )
    return mentions_gpu(PodView.read(obj, location), selection.policy)


def shipped_requests() -> Iterator[Any]:
    """The shipped scenarios' requests that the rules send, and the objects their patches
    produced (as the validating webhook and a reinvocation see them), each with whether the
    engine looks further than "no GPU here" under the shipped policies."""
    for review_file in sorted(SHIPPED_SCENARIOS.glob("*/review.json")):
        request = json.loads(review_file.read_text())["request"]
        if not is_sent_by_the_rules(request):
            continue
        folder = review_file.parent.name
        candidates = [(request, folder)]
        mutated = review_file.parent / "mutated.json"
        if mutated.is_file():
            candidates.append(
                ({**request, "object": json.loads(mutated.read_text())}, f"{folder}/mutated")
            )
        for candidate, name in candidates:
            try:
                expected = engine_sees_a_gpu(candidate)
            except MalformedObject:
                # The apiserver decodes objects into their types: this shape never reaches it.
                continue
            yield pytest.param(candidate, expected, id=name)


def _captured(folder: str) -> dict[str, Any]:
    request: dict[str, Any] = json.loads((SHIPPED_SCENARIOS / folder / "review.json").read_text())[
        "request"
    ]
    return request


def _as_kind(request: Mapping[str, Any], group: str, kind: str, obj: Any) -> dict[str, Any]:
    resource = RESOURCES[group, kind]
    return {
        **request,
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "object": obj,
    }


def made_up_requests() -> Iterator[Any]:
    """Kinds and shapes the captured reviews lack, made from them."""
    gpu = _captured("05-create-deployment-llm-serve")
    plain = _captured("27-create-deployment-whole-serve")
    for label, source, expected in (("gpu", gpu, True), ("plain", plain, False)):
        template = copy.deepcopy(source["object"]["spec"]["template"])
        metadata = {"name": "made-up", "namespace": source["namespace"]}
        podtemplate = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": metadata}
        podtemplate["template"] = template
        yield pytest.param(
            _as_kind(source, "", "PodTemplate", podtemplate), expected, id=f"podtemplate-{label}"
        )
        controller = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": metadata}
        controller["spec"] = {"replicas": 1, "selector": {"app": "x"}, "template": template}
        yield pytest.param(
            _as_kind(source, "", "ReplicationController", controller),
            expected,
            id=f"replicationcontroller-{label}",
        )
    controller = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {}}
    controller["spec"] = {"replicas": 0}
    yield pytest.param(
        _as_kind(gpu, "", "ReplicationController", controller),
        False,
        id="replicationcontroller-without-template",
    )
    # A Pod without containers, as the apiserver encodes it before its validation refuses it.
    pod = copy.deepcopy(_captured("11-create-pod-plain-web"))
    pod["object"]["spec"]["containers"] = None
    yield pytest.param(pod, False, id="pod-with-null-containers")
    # A GPU asked for only in requests: the webhook must see it to explain the rule.
    pod = copy.deepcopy(_captured("11-create-pod-plain-web"))
    pod["object"]["spec"]["containers"][0]["resources"] = {"requests": {"amd.com/gpu": "1"}}
    yield pytest.param(pod, True, id="pod-gpu-in-requests-only")
    pod = copy.deepcopy(_captured("11-create-pod-plain-web"))
    pod["object"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.5gb": "1"}}
    yield pytest.param(pod, True, id="pod-mig-profile")
    # A DRA share keeps no GPU resource, only the claim and the record: its pods (made from a
    # rewritten template) and its later UPDATEs must still reach the webhook.
    for folder in sorted((REPO_ROOT / "tests" / "scenarios" / "dra").glob("*/mutated.json")):
        request = json.loads((folder.parent / "review.json").read_text())["request"]
        rewritten = {**request, "object": json.loads(folder.read_text())}
        yield pytest.param(rewritten, True, id=f"dra-{folder.parent.name}-rewritten")
    # A GPU in a sidecar (an init container that keeps running) only.
    pod = copy.deepcopy(_captured("11-create-pod-plain-web"))
    sidecar = {"name": "probe", "image": "probe", "restartPolicy": "Always"}
    sidecar["resources"] = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    pod["object"]["spec"]["initContainers"] = [sidecar]
    yield pytest.param(pod, True, id="pod-gpu-in-sidecar-only")


# The shipped scenarios' requests, and other kinds and shapes made up from captured ones.
@pytest.mark.parametrize(("request_", "expected"), [*shipped_requests(), *made_up_requests()])
def test_match_conditions_send_what_the_engine_looks_at(
    match_conditions: dict[str, Condition], request_: dict[str, Any], expected: bool
) -> None:
    for kind, condition in match_conditions.items():
        assert condition(request_) is expected, kind


def test_match_conditions_on_the_captured_reviews(match_conditions: dict[str, Condition]) -> None:
    for folder, expected in (
        ("01-create-pod-frac-quarter", True),
        ("03-create-pod-kai-style", True),
        ("04-create-pod-sidecar-and-init", True),
        ("05-create-deployment-llm-serve", True),
        ("06-create-statefulset-notebooks", True),
        ("07-create-daemonset-gpu-probe", True),
        ("08-create-job-batch-infer", True),
        ("09-create-cronjob-nightly-eval", True),
        ("11-create-pod-plain-web", False),
        ("28-update-deployment-whole-serve", True),
    ):
        for kind, condition in match_conditions.items():
            assert condition(_captured(folder)) is expected, f"{folder}: {kind}"


# --- monitoring: the metrics port, the ServiceMonitor, the alerts and the dashboard --------

MONITORING = "overlays/monitoring"
MONITORING_GROUP = "monitoring.coreos.com"
DASHBOARD = REPO_ROOT / "deploy" / MONITORING / "dashboard.json"
# Metrics a query may name that the kube-apiserver exports, not this server.
APISERVER_METRICS = ("apiserver_admission_webhook_",)


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_the_monitoring_overlay_builds_and_its_core_objects_match_the_schemas(version: str) -> None:
    kinds = set()
    for manifest in rendered(MONITORING):
        kinds.add(manifest["kind"])
        if group_of(manifest) in (MONITORING_GROUP, CERT_MANAGER_GROUP):
            continue
        try:
            kubernetes_validate.validate(manifest, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{describe(manifest)} in Kubernetes {version}: {error.message}")
    assert {"ServiceMonitor", "PrometheusRule", "Deployment"} <= kinds


def test_the_service_monitor_reaches_the_plain_http_metrics_port() -> None:
    monitor = find(MONITORING, "ServiceMonitor", NAME)
    assert monitor["apiVersion"] == f"{MONITORING_GROUP}/v1"
    service = find(MONITORING, "Service", NAME)
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = [p for p in service["spec"]["ports"] if p["name"] == endpoint["port"]]
    container = pod_spec_of(MONITORING, "Deployment", NAME)["containers"][0]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named["metrics"] == port["targetPort"] == 9102
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["METRICS_BIND"] == "0.0.0.0:9102"
    policy = find(MONITORING, "NetworkPolicy", NAME)
    admitted = [
        rule
        for rule in policy["spec"]["ingress"]
        if {"port": 9102, "protocol": "TCP"} in rule["ports"]
    ]
    assert admitted and all("from" in rule for rule in admitted), "9102 only from monitoring"


def queried_metrics() -> dict[str, str]:
    """Every metric a PrometheusRule expression or a dashboard panel names, and where."""
    found: dict[str, str] = {}
    rule = find(MONITORING, "PrometheusRule", NAME)
    for group in rule["spec"]["groups"]:
        for alert in group["rules"]:
            for name in re.findall(r"\b([a-z_]+_[a-z_]+)(?=[{\[\s)])", alert["expr"]):
                found.setdefault(name, alert["alert"])
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in re.findall(r"\b([a-z_]+_[a-z_]+)(?=[{\[\s)])", target["expr"]):
                found.setdefault(name, panel["title"])
    functions = {"histogram_quantile", "count_over_time"}
    return {name: where for name, where in found.items() if name not in functions}


def test_every_metric_the_alerts_and_the_dashboard_query_is_one_the_server_exports(
    tmp_path: Path,
) -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from webhook.certs import ensure_dev_certificates
    from webhook.server.metrics import WebhookMetrics

    certificates = ensure_dev_certificates(tmp_path)[0]
    metrics = WebhookMetrics(certificates.cert)
    metrics.shares_rewritten.labels("p", "m").inc()
    metrics.admission_duration.labels("mutate").observe(0.001)
    exported = {
        sample.name
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for sample in family.samples
    }
    queried = queried_metrics()
    assert any(name.startswith("gpu_webhook_") for name in queried)
    unknown = {
        name: where
        for name, where in queried.items()
        if name not in exported and not name.startswith(APISERVER_METRICS)
    }
    assert not unknown, f"queried but not exported (metric: where): {unknown}"


def test_the_dashboard_is_a_grafana_dashboard_with_the_panels_the_issue_asks_for() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["schemaVersion"] >= 36
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {
        "Admissions by verdict",
        "Admissions by policy",
        "Latency",
        "Shares rewritten by GPU model",
        "Policy reloads",
        "Serving certificate expires in",
    } <= titles
    config = find(MONITORING, "ConfigMap", "gpu-admission-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config["data"]["gpu-admission.json"]) == dashboard


def test_the_scan_role_lists_exactly_what_scan_reads_and_nothing_more() -> None:
    from webhook.cli.manifests import RESOURCES
    from webhook.cli.scan import NAMESPACES, SCANNED_KINDS

    role = find("scan", "ClusterRole", "gpu-admission-scan")
    granted = {
        (group, resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if rule["verbs"] == ["list"]
    }
    assert all(rule["verbs"] == ["list"] for rule in role["rules"])
    # Discovery (/api, /apis) is open to every authenticated user (system:discovery).
    read = {("", NAMESPACES.rsplit("/", 1)[1])}
    read |= {(group, RESOURCES[kind]) for group, kind in SCANNED_KINDS}
    assert granted == read
    for version in SCHEMA_VERSIONS:
        kubernetes_validate.validate(role, version, strict=True)
