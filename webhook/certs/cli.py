"""The command line: `python -m webhook.certs dev|renew|cluster`.

Exit codes: 0 done (whether or not anything changed), 1 the certificates could not be made or
published, 2 a usage or input error."""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

from webhook.certs.directory import DEFAULT_DEV_DIRECTORY, ensure_dev_certificates, renew_directory
from webhook.certs.hosts import checked_hosts, dev_hosts, service_hosts
from webhook.certs.renewal import DEFAULT_RENEW_BEFORE_DAYS, CAUnusable, renewal_window

KUBE_MODES = ("auto", "in-cluster", "kubeconfig")


def main(argv: list[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if (args.service is None) != (args.namespace is None) and args.command != "cluster":
        parser.error("--service and --namespace go together")
    if args.command == "dev":
        return _dev(args)
    if args.command == "renew":
        return _renew(args)
    return _cluster(args)


def _dev(args: argparse.Namespace) -> int:
    hosts = args.hosts
    if args.service:
        hosts = [*(hosts or dev_hosts()), *service_hosts(args.service, args.namespace)]
    try:
        paths, written = ensure_dev_certificates(args.dir, hosts, renew_before=args.renew_before)
    except (OSError, ValueError) as error:
        return _fail(error, 2)
    if written:
        print(f"created certificates in {args.dir}; CA certificate: {paths.ca_cert}")
    else:
        print(
            f"existing certificates in {args.dir} are still valid; CA certificate: {paths.ca_cert}"
        )
    return 0


def _renew(args: argparse.Namespace) -> int:
    hosts = args.hosts
    if args.service:
        hosts = [*(hosts or []), *service_hosts(args.service, args.namespace)]
    try:
        renewal = renew_directory(args.dir, hosts, renew_before=args.renew_before)
    except CAUnusable as error:
        return _fail(error, 1)
    except (OSError, ValueError) as error:
        return _fail(error, 2)
    if renewal.changed:
        until = f"{renewal.cert.not_valid_after_utc:%Y-%m-%d}"
        print(
            f"{args.dir}: serving certificate renewed from the same CA, valid until {until} "
            f"({renewal.reason})"
        )
    else:
        print(f"{args.dir}: nothing changed, {renewal.reason}")
    return 0


def _cluster(args: argparse.Namespace) -> int:
    # Imported here: the kubernetes client takes about two seconds to import, and `dev`
    # (run by every `make run`) never needs it.
    from webhook.certs.cluster import ClusterOptions, sync
    from webhook.kube.client_config import api_client
    from webhook.policy.namespace_labels import NoCluster

    try:
        checked_hosts(service_hosts(args.service, args.namespace))
    except ValueError as error:
        return _fail(error, 2)
    options = ClusterOptions(
        namespace=args.namespace,
        service=args.service,
        secret=args.secret,
        webhook_name=args.webhook_name,
        renew_before=args.renew_before,
        allow_missing_webhook=args.allow_missing_webhook,
    )
    client = api_client(args.kube)
    if isinstance(client, NoCluster):
        return _fail(f"no Kubernetes API to talk to: {client.reason}", 1)
    try:
        report = sync(options, client)
    finally:
        client.close()
    for line in report.lines:
        print(line)
    for problem in report.errors:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if report.errors else 0


def _fail(error: object, code: int) -> int:
    print(f"error: {error}", file=sys.stderr)
    return code


def _renew_before(text: str) -> timedelta:
    try:
        return renewal_window(int(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webhook.certs", description="Webhook TLS certificate tooling."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser(
        "dev", help="create or refresh a development CA and serving certificate"
    )
    renew = commands.add_parser(
        "renew",
        help="issue a new serving certificate from the directory's CA when it is due; "
        "never replaces the CA",
    )
    for command, hosts_default in (
        (dev, "localhost, 127.0.0.1, ::1"),
        (renew, "the names the current certificate covers"),
    ):
        command.add_argument(
            "--dir",
            type=Path,
            default=DEFAULT_DEV_DIRECTORY,
            help=f"certificate directory (default: {DEFAULT_DEV_DIRECTORY})",
        )
        command.add_argument(
            "--host",
            action="append",
            dest="hosts",
            metavar="H",
            help=f"DNS name or IP address to cover; repeatable (default: {hosts_default})",
        )
        command.add_argument("--service", metavar="SVC", help="also cover this Service's names")
        command.add_argument("--namespace", metavar="NS", help="the Service's namespace")
        _renew_before_option(command)

    cluster = commands.add_parser(
        "cluster",
        help="keep the CA and serving certificate in a TLS Secret and set the webhook "
        "configurations' caBundle",
    )
    cluster.add_argument("--namespace", required=True, metavar="NS", help="the webhook's namespace")
    cluster.add_argument("--service", required=True, metavar="SVC", help="the webhook's Service")
    cluster.add_argument("--secret", required=True, metavar="SECRET", help="the TLS Secret")
    cluster.add_argument(
        "--webhook-name",
        required=True,
        metavar="NAME",
        help="the name of the MutatingWebhookConfiguration and ValidatingWebhookConfiguration",
    )
    cluster.add_argument(
        "--kube",
        choices=KUBE_MODES,
        default="auto",
        help="the pod's service account (in-cluster), KUBECONFIG or ~/.kube/config "
        "(kubeconfig), or in-cluster when running in a pod, else a kubeconfig (auto, default)",
    )
    cluster.add_argument(
        "--allow-missing-webhook",
        action="store_true",
        help="a webhook configuration that does not exist is skipped instead of an error",
    )
    _renew_before_option(cluster)
    return parser


def _renew_before_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--renew-before-days",
        dest="renew_before",
        type=_renew_before,
        default=timedelta(days=DEFAULT_RENEW_BEFORE_DAYS),
        metavar="N",
        help="issue a new serving certificate when the current one has N days or less left "
        f"(default: {DEFAULT_RENEW_BEFORE_DAYS})",
    )
