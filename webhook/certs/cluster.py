"""Certificates in the cluster, the way ingress-nginx's kube-webhook-certgen keeps them: a CA and
a serving certificate for the webhook Service in a TLS Secret, the serving certificate issued
again from the same CA when it nears expiry or no longer covers the Service, and the CA
published as the caBundle of the webhook configurations.

Every step reads, decides, and writes only a difference, with the resourceVersion (or a JSON
patch `test`) guarding against a writer in between: a conflict means read again. A second run
writes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from kubernetes.client import AdmissionregistrationV1Api, ApiClient, CoreV1Api

from webhook.certs.ca_bundle import ca_bundle_patch
from webhook.certs.hosts import service_hosts
from webhook.certs.renewal import CA_CERT, Renewal, renew
from webhook.certs.tls_secret import SECRET_TYPE, ApiError, Conflict, TLSSecret
from webhook.certs.webhook_configurations import KINDS, Missing, WebhookConfiguration

MAX_ATTEMPTS = 5
CA_COMMON_NAME = "gpu-admission-webhook CA"


@dataclass(frozen=True)
class ClusterOptions:
    namespace: str
    service: str
    secret: str
    webhook_name: str
    renew_before: timedelta
    allow_missing_webhook: bool = False


@dataclass
class Report:
    """What a run did, one line per object; `errors` make the run fail."""

    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    changed: bool = False


class Unusable(Exception):
    """The cluster holds something this tool must not overwrite."""


def sync(options: ClusterOptions, client: ApiClient) -> Report:
    report = Report()
    secret = TLSSecret(CoreV1Api(client), options.namespace, options.secret)
    try:
        renewal = sync_secret(secret, options, report)
    except (ApiError, Conflict, Unusable) as error:
        report.errors.append(str(error))
        return report
    admission = AdmissionregistrationV1Api(client)
    for kind in KINDS:
        configuration = WebhookConfiguration(admission, kind, options.webhook_name)
        try:
            publish_ca_bundle(configuration, renewal.files[CA_CERT], report)
        except Missing:
            if options.allow_missing_webhook:
                report.lines.append(
                    f"{configuration}: not found; skipped (--allow-missing-webhook)"
                )
            else:
                report.errors.append(
                    f"{configuration} not found: apply the webhook configurations before this "
                    "Job sets their caBundle, or pass --allow-missing-webhook"
                )
        except (ApiError, Conflict) as error:
            report.errors.append(str(error))
    if not report.errors and not report.changed:
        report.lines.append("nothing changed: the Secret and the caBundles are up to date")
    return report


def sync_secret(secret: TLSSecret, options: ClusterOptions, report: Report) -> Renewal:
    """Create the Secret, or renew what it holds when due; the certificates it ends with."""
    hosts = service_hosts(options.service, options.namespace)
    conflict: Conflict | None = None
    for _ in range(MAX_ATTEMPTS):
        current = secret.read()
        stored = {} if current is None else current.files
        if current is not None and current.type != SECRET_TYPE:
            raise Unusable(
                f"{secret} has type {current.type}, not {SECRET_TYPE}: delete it, or name "
                "another Secret with --secret"
            )
        renewal = renew(
            stored,
            hosts,
            renew_before=options.renew_before,
            ca_common_name=CA_COMMON_NAME,
        )
        try:
            if current is None:
                secret.create(renewal.files)
            elif renewal.changed:
                secret.update(current, renewal.files)
        except Conflict as error:
            conflict = error
            continue
        report.lines.append(_secret_line(secret, renewal, created=current is None))
        report.changed |= renewal.changed
        return renewal
    raise Conflict(f"{conflict}; gave up after {MAX_ATTEMPTS} attempts")


def publish_ca_bundle(configuration: WebhookConfiguration, ca_pem: bytes, report: Report) -> None:
    conflict: Conflict | None = None
    for _ in range(MAX_ATTEMPTS):
        patch = ca_bundle_patch(configuration.read(), ca_pem)
        if not patch.webhooks:
            report.lines.append(f"{configuration}: has no webhooks, nothing to set")
            return
        if not patch.operations:
            report.lines.append(
                f"{configuration}: caBundle up to date in {_webhooks(patch.webhooks)}"
            )
            return
        try:
            configuration.patch(patch.operations)
        except Conflict as error:
            conflict = error
            continue
        report.lines.append(f"{configuration}: caBundle set in {', '.join(patch.patched)}")
        report.changed = True
        return
    raise Conflict(f"{conflict}; gave up after {MAX_ATTEMPTS} attempts")


def _secret_line(secret: TLSSecret, renewal: Renewal, *, created: bool) -> str:
    until = f"{renewal.cert.not_valid_after_utc:%Y-%m-%d}"
    if created:
        ca_until = f"{renewal.ca_cert.not_valid_after_utc:%Y-%m-%d}"
        return (
            f"{secret}: created, with a new CA (valid until {ca_until}) and a serving "
            f"certificate (valid until {until})"
        )
    if renewal.action == "keep":
        return f"{secret}: unchanged, {renewal.reason}"
    if renewal.action == "reissue":
        what = "serving certificate renewed from the same CA"
    else:
        what = "new CA and serving certificate; the caBundle changes"
    return f"{secret}: {what}, valid until {until} ({renewal.reason})"


def _webhooks(count: int) -> str:
    return "1 webhook" if count == 1 else f"{count} webhooks"
