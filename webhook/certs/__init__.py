"""Certificate tooling for the webhook's TLS endpoint: a small private CA and ECDSA P-256 serving
certificates it signs, kept in a directory (development, `renew`) or in a Kubernetes TLS Secret
whose CA becomes the caBundle of the webhook configurations (`cluster`).

    python -m webhook.certs dev [--dir DIR] [--host H ...] [--service SVC --namespace NS]
    python -m webhook.certs renew [--dir DIR] [--host H ...] [--renew-before-days N]
    python -m webhook.certs cluster --namespace NS --service SVC --secret SECRET \\
        --webhook-name NAME [--renew-before-days N] [--kube auto|in-cluster|kubeconfig] \\
        [--allow-missing-webhook]
"""

from webhook.certs.cli import main
from webhook.certs.directory import DEV_CA_COMMON_NAME, ensure_dev_certificates, renew_directory
from webhook.certs.files import CertificatePaths, write_certificate, write_private_key
from webhook.certs.hosts import dev_hosts, service_hosts
from webhook.certs.issue import (
    CA_VALID_DAYS,
    CLOCK_SKEW,
    SERVING_VALID_DAYS,
    create_ca,
    issue_serving_certificate,
)
from webhook.certs.renewal import DEFAULT_RENEW_BEFORE_DAYS, CAUnusable, Renewal, renew

__all__ = [
    "CA_VALID_DAYS",
    "CLOCK_SKEW",
    "DEFAULT_RENEW_BEFORE_DAYS",
    "DEV_CA_COMMON_NAME",
    "SERVING_VALID_DAYS",
    "CAUnusable",
    "CertificatePaths",
    "Renewal",
    "create_ca",
    "dev_hosts",
    "ensure_dev_certificates",
    "issue_serving_certificate",
    "main",
    "renew",
    "renew_directory",
    "service_hosts",
    "write_certificate",
    "write_private_key",
]
