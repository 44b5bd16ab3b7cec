"""`python -m webhook advertise`: give the nodes of every sharing policy's pool the VRAM resource
that rewritten pods ask for, once (`--once`, `--dry-run`) or for as long as it runs.

Exit codes: 0 every node is as the policies say; 1 a node was skipped or a patch failed (once),
or the lease was lost (service); 2 the policies do not load, no API, RBAC refuses, bad options.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from webhook.bind_address import parse_bind
from webhook.cli.errors import InputError
from webhook.nodes.patch_limits import (
    DEFAULT_BURST,
    DEFAULT_CONCURRENCY,
    DEFAULT_QPS,
    PatchLimits,
)

DEFAULT_LEASE_NAME = "gpu-vram-advertiser"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
LIST_TIMEOUT = (5.0, 60.0)
# What a pass has queued of its node events is sent before the command ends, this long at most.
EVENTS_FLUSH_SECONDS = 2.0
LOG_FORMAT = "%(asctime)s %(levelname)s %(message)s"

T = TypeVar("T")


@dataclass(frozen=True)
class AdvertiseOptions:
    policies: Path
    once: bool
    dry_run: bool
    resync_seconds: float
    metrics_bind: tuple[str, int] | None
    lease_name: str
    lease_namespace: str | None
    lease_seconds: int
    identity: str | None
    leader_election: bool
    limits: PatchLimits = field(default_factory=PatchLimits)


def add_parser(commands: Any, default_policies: Path) -> None:
    advertise = commands.add_parser(
        "advertise",
        help="keep the VRAM resource in the status of the nodes the policies share",
        description="Compute each node's VRAM from its labels (GPU feature discovery, the AMD "
        "node labeller, the policy's models, or the gpu-admission.example.com/vram-mib "
        "label) and patch status.capacity and status.allocatable of the nodes in each "
        "sharing policy's pool; remove it from nodes that left the pool. Uses KUBECONFIG or "
        "the pod's service account. Without --once it watches nodes and policies, and holds "
        "a Lease so that one of several replicas patches.",
    )
    advertise.add_argument(
        "--policies",
        type=Path,
        default=default_policies,
        metavar="DIR",
        help="the policy directory (default: policies)",
    )
    advertise.add_argument(
        "--once", action="store_true", help="one pass over the nodes, then exit (a CronJob)"
    )
    advertise.add_argument(
        "--dry-run",
        action="store_true",
        help="print each node's JSON patch as a line of JSON instead of sending it; one pass",
    )
    advertise.add_argument(
        "--resync-seconds",
        type=_positive_float,
        default=300.0,
        metavar="S",
        help="how often every node is checked again besides the watch (default: 300)",
    )
    advertise.add_argument(
        "--metrics-bind",
        type=_host_port,
        metavar="HOST:PORT",
        help="serve /metrics and /healthz over plain HTTP there (default: off)",
    )
    advertise.add_argument(
        "--lease-name",
        default=DEFAULT_LEASE_NAME,
        metavar="NAME",
        help=f"the coordination.k8s.io Lease (default: {DEFAULT_LEASE_NAME})",
    )
    advertise.add_argument(
        "--lease-namespace",
        metavar="NS",
        help="its namespace (default: POD_NAMESPACE, else the pod's service account namespace)",
    )
    advertise.add_argument(
        "--lease-seconds",
        type=int,
        default=15,
        metavar="S",
        help="how long the lease lasts unrenewed (default: 15, at least 3)",
    )
    advertise.add_argument(
        "--identity",
        metavar="ID",
        help="this replica's name in the lease (default: POD_NAME, else host name and pid)",
    )
    advertise.add_argument(
        "--patch-qps",
        type=_rate,
        default=DEFAULT_QPS,
        metavar="N",
        help="node status patches a second at most, as client-go's QPS; 0: no client-side "
        f"limit, the apiserver's 429s still pause (default: {DEFAULT_QPS:g})",
    )
    advertise.add_argument(
        "--patch-burst",
        type=_at_least_one,
        default=DEFAULT_BURST,
        metavar="N",
        help="patches at once after a quiet spell, as client-go's burst "
        f"(default: {DEFAULT_BURST})",
    )
    advertise.add_argument(
        "--patch-concurrency",
        type=_at_least_one,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"patches in flight at most (default: {DEFAULT_CONCURRENCY})",
    )
    advertise.add_argument(
        "--no-leader-election",
        dest="leader_election",
        action="store_false",
        help="patch without holding the lease (only ever one replica)",
    )


def options_from(args: argparse.Namespace) -> AdvertiseOptions:
    return AdvertiseOptions(
        policies=args.policies,
        once=args.once or args.dry_run,
        dry_run=args.dry_run,
        resync_seconds=args.resync_seconds,
        metrics_bind=args.metrics_bind,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
        lease_seconds=args.lease_seconds,
        identity=args.identity,
        leader_election=args.leader_election,
        limits=PatchLimits(args.patch_qps, args.patch_burst, args.patch_concurrency),
    )


def run_advertise(
    options: AdvertiseOptions,
    *,
    stdout: TextIO,
    stderr: TextIO,
    environ: Mapping[str, str] | None = None,
) -> int:
    env = os.environ if environ is None else environ
    # Imported here: the kubernetes client takes about two seconds to import, which the
    # offline commands never need.
    from webhook.kube.client_config import api_client
    from webhook.policy.namespace_labels import NoCluster

    with _logging_to(stderr):
        if not options.policies.is_dir():
            raise InputError(f"{options.policies}: not a policy directory")
        # Checked before the API is: a policy edit that does not load needs no cluster to see.
        policies = _load_policies(options.policies)
        client = api_client("auto", environ=env, connections=options.limits.concurrency)
        if isinstance(client, NoCluster):
            raise InputError(f"no Kubernetes API to talk to: {client.reason}")
        try:
            if options.once:
                return _once(client, options, policies, stdout, env)
            # The service lists again as it starts watching: here one node shows access.
            _list_nodes(client, _one_node)
            return _serve(client, options, env)
        finally:
            client.close()


def _once(
    client: Any,
    options: AdvertiseOptions,
    policies: tuple[Any, ...],
    stdout: TextIO,
    env: Mapping[str, str],
) -> int:
    from kubernetes.client import CoreV1Api

    from webhook.kube.paged_list import list_in_pages
    from webhook.nodes.advertiser import Advertiser, Forbidden
    from webhook.nodes.advertiser_metrics import AdvertiserMetrics
    from webhook.nodes.node_events import NodeEvents

    core = CoreV1Api(client)
    events = None if options.dry_run else NodeEvents(core, _identity(options, env))
    advertiser = Advertiser(
        core,
        lambda: policies,
        metrics=AdvertiserMetrics(),
        events=events,
        dry_run=options.dry_run,
        out=stdout,
        limits=options.limits,
    )
    nodes = _list_nodes(
        client,
        lambda core: (
            list_in_pages(core.list_node, advertiser.keep, request_timeout=LIST_TIMEOUT).items
        ),
    )
    try:
        tally = advertiser.once(nodes)
    except Forbidden as error:
        raise InputError(str(error)) from None
    finally:
        if events is not None:
            events.close(EVENTS_FLUSH_SECONDS)
    stdout.write(tally.summary(dry_run=options.dry_run) + "\n")
    return 1 if tally.skipped or tally.failed else 0


def _serve(client: Any, options: AdvertiseOptions, env: Mapping[str, str]) -> int:
    from webhook.nodes.leadership import LeaseTerms
    from webhook.nodes.service import NodeService, ServiceOptions
    from webhook.policy.problems import PolicyLoadError
    from webhook.policy.store import PolicyStore

    identity = _identity(options, env)
    lease = None
    if options.leader_election:
        namespace = options.lease_namespace or env.get("POD_NAMESPACE") or _pod_namespace()
        if not namespace:
            raise InputError(
                "the lease needs a namespace: set POD_NAMESPACE or --lease-namespace, or run "
                "one replica with --no-leader-election"
            )
        try:
            lease = LeaseTerms(options.lease_name, namespace, identity, options.lease_seconds)
        except ValueError as error:
            raise InputError(f"--lease-seconds: {error}") from None
    service = NodeService(
        client,
        ServiceOptions(
            policies=options.policies,
            identity=identity,
            resync_seconds=options.resync_seconds,
            lease=lease,
            metrics_bind=options.metrics_bind,
            limits=options.limits,
        ),
    )
    try:
        store = PolicyStore.open(options.policies, observers=[service])
    except PolicyLoadError as error:
        raise InputError(_policy_problems(options.policies, error)) from None
    return service.run(store)


def _list_nodes(client: Any, listing: Callable[[Any], T]) -> T:
    """What `listing` reads of the nodes with a `CoreV1Api`, or an InputError that says why the
    API cannot be used."""
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException

    from webhook.kube.api_errors import HTTP_FORBIDDEN, short_reason

    try:
        return listing(CoreV1Api(client))
    except ApiException as error:
        if error.status == HTTP_FORBIDDEN:
            raise InputError(
                f"cannot list nodes: {short_reason(error)}: grant the verbs get, list and watch "
                "on nodes (deploy/base/advertiser-rbac.yaml)"
            ) from None
        raise InputError(f"cannot list nodes: {short_reason(error)}") from None
    except Exception as error:  # no connection, a timeout, a body that is not JSON
        host = client.configuration.host
        reason = short_reason(error)
        raise InputError(f"the Kubernetes API at {host} did not answer: {reason}") from None


def _one_node(core: Any) -> Any:
    from webhook.kube import raw_json

    return raw_json.call(core.list_node, limit=1, _request_timeout=LIST_TIMEOUT)


def _load_policies(directory: Path) -> tuple[Any, ...]:
    from webhook.policy.policy_set import PolicySet
    from webhook.policy.problems import PolicyLoadError

    try:
        return PolicySet.load(directory).policies
    except PolicyLoadError as error:
        raise InputError(_policy_problems(directory, error)) from None


def _policy_problems(directory: Path, error: Any) -> list[str]:
    return [f"the policies in {directory} do not load:", *(f"  {p}" for p in error.problems)]


def _identity(options: AdvertiseOptions, env: Mapping[str, str]) -> str:
    return options.identity or env.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def _pod_namespace() -> str | None:
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


@contextmanager
def _logging_to(stream: TextIO) -> Iterator[None]:
    """The advertiser's log lines on `stream` while the command runs."""
    logger = logging.getLogger("webhook")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _host_port(text: str) -> tuple[str, int]:
    try:
        return parse_bind(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate: a number, 0 or more")
    return value


def _at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)
