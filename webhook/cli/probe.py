"""`gpu-admission probe`: whether a share that the policies give really holds on a GPU node.

The share is made as the webhook makes it: a Pod that asks for it on the model's nodes is judged
by the same engine as `review` (mutating, with the policies of --policies), and the patched
container's env and the shares record's MiB are what the probe runs with (webhook/probe/). With
--render-only they are written to a share file instead, for `python -m webhook.probe run
--share-file` on a node that has a framework but none of this package's dependencies.

Exit codes: those of webhook/probe/session.py; a pod the policies deny is a usage error (2).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import jsonpatch
import jsonpointer

from webhook.admission.decide import WOULD_DENY
from webhook.cli.admit import admit, review_body
from webhook.cli.errors import InputError
from webhook.cli.labels import parse_label_list
from webhook.cli.manifests import DEFAULT_NAMESPACE, creation_review, read_manifest
from webhook.cli.policies import load_policy_set
from webhook.engine.share_record import ShareRecord
from webhook.policy.defaults import SHARES_ANNOTATION
from webhook.policy.model import FractionHandling, Policy, Sharing
from webhook.policy.namespace_labels import NamespaceLabelSource, StaticNamespaceLabels
from webhook.policy.policy_set import PolicySet
from webhook.probe.gpu import missing_gpu
from webhook.probe.session import CannotProbe, RunOptions, add_run_options, probe, run_options
from webhook.probe.share import Share, ShareError, share_file_text

POD_NAME = "gpu-probe"
CONTAINER = "probe"
# The resource a fraction is written in when the policy rewrites no other one's fractions.
FRACTION_RESOURCE = "nvidia.com/gpu"
STDOUT = "-"


@dataclass(frozen=True)
class ProbeOptions:
    """One of `fraction` and `memory` is set: the share as a user writes it."""

    policies: Path
    model: str
    fraction: str | None = None
    memory: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    namespace_labels: Mapping[str, str] | None = None
    render_only: str | None = None
    run: RunOptions = field(default_factory=RunOptions)


def add_parser(commands: Any, default_policies: Path) -> None:
    command = commands.add_parser(
        "probe",
        help="measure on this GPU node whether a share the policies give holds",
        description="Make the share a pod would get (a Pod asking for --fraction or --memory "
        "on --model, rewritten by the policies as the webhook would), then let each installed "
        "framework (PyTorch, JAX, CuPy, TensorFlow) take GPU memory with the share's env until "
        "it is refused, and judge what it got against the share. Exit 0 when the share holds "
        "for every framework, 1 when it does not hold for one, 2 when there is no NVIDIA GPU "
        "here, the pod is denied, or the usage is wrong.",
    )
    command.add_argument(
        "--policies",
        type=Path,
        default=default_policies,
        metavar="DIR",
        help="the policy directory (default: policies)",
    )
    share = command.add_mutually_exclusive_group(required=True)
    share.add_argument(
        "--fraction", metavar="F", help="a share of the card, as nvidia.com/gpu (0.25, 250m)"
    )
    share.add_argument(
        "--memory",
        metavar="AMOUNT",
        help="an amount of GPU memory in the policy's VRAM resource (4Gi, or plain units)",
    )
    command.add_argument(
        "--model",
        required=True,
        metavar="PRODUCT",
        help="the card of the node pool, as its model label says (NVIDIA-A100-SXM4-40GB)",
    )
    command.add_argument(
        "-n",
        "--namespace",
        default=DEFAULT_NAMESPACE,
        metavar="NS",
        help="the namespace the pod would be created in, which chooses the policy "
        f"(default: {DEFAULT_NAMESPACE})",
    )
    command.add_argument(
        "--namespace-labels",
        type=_labels,
        metavar="K=V,...",
        help="the labels of that namespace, for policies that select namespaces by label",
    )
    command.add_argument(
        "--render-only",
        metavar="PATH",
        help="write the share file (shareMiB, env, policy, backend, model) there, - for stdout, "
        "and stop: for `python -m webhook.probe run --share-file PATH` on the node",
    )
    add_run_options(command)


def options_from(args: argparse.Namespace) -> ProbeOptions:
    return ProbeOptions(
        policies=args.policies,
        model=args.model,
        fraction=args.fraction,
        memory=args.memory,
        namespace=args.namespace,
        namespace_labels=args.namespace_labels,
        render_only=args.render_only,
        run=run_options(args),
    )


def run_probe(
    options: ProbeOptions,
    *,
    stdout: TextIO,
    stderr: TextIO,
    find_missing_gpu: Callable[[], str | None] = missing_gpu,
) -> int:
    share = render_share(options, stderr=stderr)
    if options.render_only is not None:
        _write_share_file(share, options.render_only, stdout=stdout, stderr=stderr)
        return 0
    try:
        return probe(
            share, options.run, stdout=stdout, stderr=stderr, find_missing_gpu=find_missing_gpu
        )
    except (CannotProbe, ShareError) as error:
        raise InputError(str(error)) from None


def render_share(options: ProbeOptions, *, stderr: TextIO = sys.stderr) -> Share:
    """The share a pod asking as `options` say gets from the policies: its MiB and env.
    InputError when the policies do not load, deny the pod, or give it no share."""
    policies = load_policy_set(options.policies, used_by="probe")
    labels = _label_source(options.namespace_labels)
    policy = policies.select(options.namespace, {}, labels).policy
    sharing = policy.sharing
    if sharing is None:
        raise InputError(
            f'policy "{policy.name}", which governs namespace "{options.namespace}", shares no '
            "GPU (it has no spec.sharing): there is no share to probe"
        )
    pod = probe_pod(options, policy, sharing)
    patched = _admitted(pod, policies, options.namespace, labels, stderr)
    return _share_of(patched, options, policy, sharing)


def probe_pod(options: ProbeOptions, policy: Policy, sharing: Sharing) -> dict[str, Any]:
    """A Pod with one container asking for the share, on nodes of `options.model`."""
    if options.fraction is not None:
        limits = {_fraction_resource(policy): options.fraction}
    else:
        limits = {sharing.vram_resource: str(options.memory)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD_NAME, "namespace": options.namespace},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {sharing.model_label: options.model},
            "containers": [{"name": CONTAINER, "image": POD_NAME, "resources": {"limits": limits}}],
        },
    }


def _fraction_resource(policy: Policy) -> str:
    """nvidia.com/gpu, or the first resource whose fractions the policy rewrites if it does
    not rewrite that one's."""
    rewritten = [
        resource.name
        for resource in policy.resources
        if resource.fractions is FractionHandling.REWRITE and not resource.is_family
    ]
    return FRACTION_RESOURCE if FRACTION_RESOURCE in rewritten or not rewritten else rewritten[0]


def _admitted(
    pod: dict[str, Any],
    policies: PolicySet,
    namespace: str,
    labels: NamespaceLabelSource,
    stderr: TextIO,
) -> Any:
    body = review_body(creation_review(read_manifest(pod), namespace))
    admission = admit(body, policies, "mutate", labels)
    verdict = admission.verdict
    policy = verdict.audit_annotations.get("policy", "?")
    if not verdict.allowed:
        raise InputError(f'the pod is denied by policy "{policy}": {verdict.message}')
    for warning in verdict.warnings:
        stderr.write(f"warning: {warning}\n")
    would_deny = verdict.audit_annotations.get(WOULD_DENY)
    if would_deny:
        stderr.write(f"warning: would be denied under Enforce: {would_deny}\n")
    try:
        return jsonpatch.apply_patch(pod, list(verdict.patch))
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
        raise InputError(f"the webhook's patch does not apply: {error}") from None


def _share_of(patched: Any, options: ProbeOptions, policy: Policy, sharing: Sharing) -> Share:
    annotations = patched.get("metadata", {}).get("annotations", {})
    record = ShareRecord.read(annotations)
    entry = record.containers.get(CONTAINER)
    asked = options.fraction if options.fraction is not None else options.memory
    if SHARES_ANNOTATION not in annotations or entry is None:
        raise InputError(
            f'policy "{policy.name}" gives a pod asking for {asked} no share (a whole GPU, or '
            "nothing it shares): there is no share to probe"
        )
    # The record gives the MiB beside what a backend wrote; a share written in the VRAM
    # resource alone (ExtendedResource, KAI) is in `vram`, in the policy's unit.
    mib = int(entry.mib) if entry.mib.isdigit() else int(entry.vram) * sharing.mib_per_unit
    (container,) = patched["spec"]["containers"]
    env = {
        item["name"]: item["value"]
        for item in container.get("env", ())
        if isinstance(item.get("value"), str)
    }
    about = {"policy": policy.name, "backend": sharing.backend.value}
    if record.model:
        about["model"] = record.model
    if options.fraction is not None:
        about["fraction"] = options.fraction
    else:
        about["memory"] = str(options.memory)
    about["asked"] = entry.asked
    return Share(mib, env, about, source=f"policies {options.policies}")


def _write_share_file(share: Share, path: str, *, stdout: TextIO, stderr: TextIO) -> None:
    text = share_file_text(share)
    if path == STDOUT:
        stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise InputError(f"{path}: cannot be written: {error.strerror or error}") from None
    stderr.write(f"wrote {path}: {share.describe()}\n")


def _label_source(labels: Mapping[str, str] | None) -> NamespaceLabelSource:
    if labels is None:
        return StaticNamespaceLabels(reason="no --namespace-labels were given")
    return StaticNamespaceLabels(others=labels)


def _labels(text: str) -> dict[str, str]:
    try:
        return parse_label_list(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
