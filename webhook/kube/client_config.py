"""Which Kubernetes API this process asks for namespace labels: the cluster it runs in, the one
a kubeconfig names, or none. A configuration that does not load never stops the server: the
labels are then unknown, and the reason says why."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from kubernetes.client import ApiClient, Configuration
from kubernetes.config.incluster_config import (
    SERVICE_CERT_FILENAME,
    SERVICE_HOST_ENV_NAME,
    SERVICE_TOKEN_FILENAME,
    InClusterConfigLoader,
)
from kubernetes.config.kube_config import load_kube_config
from urllib3.util.retry import Retry

from webhook.kube.label_modes import MODE_VARIABLE, check_mode
from webhook.kube.namespace_cache import NamespaceLabelCache
from webhook.policy.namespace_labels import NamespaceLabelSource, NoCluster

log = logging.getLogger("webhook")

USER_AGENT = "gpu-admission-webhook"
# No retries inside urllib3: a miss must not keep an admission waiting for several lookup
# timeouts, and the informer retries on its own backoff, warning once per outage.
RETRIES = Retry(total=0)
NOT_CONFIGURED = "no Kubernetes API is configured (not in a cluster, no kubeconfig)"


def namespace_label_source(
    mode: str = "auto", *, environ: Mapping[str, str] | None = None
) -> NamespaceLabelSource:
    """A started `NamespaceLabelCache` on the API `mode` selects, or `NoCluster` saying why
    there is none. Raises ValueError only for a mode that is not one of `MODES`."""
    client = api_client(mode, environ=environ)
    if isinstance(client, NoCluster):
        if mode != "off" and client.reason != NOT_CONFIGURED:
            log.warning("namespace labels are unknown: %s", client.reason)
        return client
    cache = NamespaceLabelCache(client)
    cache.start()
    return cache


def api_client(
    mode: str = "auto",
    *,
    environ: Mapping[str, str] | None = None,
    connections: int | None = None,
) -> ApiClient | NoCluster:
    """A client for the API `mode` selects (see `namespace_label_source`), or `NoCluster`
    saying why there is none; the caller reports that in its own words. `connections`: how
    many calls it makes at once, each on a connection kept for the next."""
    check_mode(mode)
    env = os.environ if environ is None else environ
    if mode == "off":
        return NoCluster(f"namespace label lookup is off ({MODE_VARIABLE}=off)")
    if mode == "in-cluster" or (mode == "auto" and env.get(SERVICE_HOST_ENV_NAME)):
        return _load(
            "the in-cluster configuration",
            lambda config: _load_in_cluster(config, env),
            connections,
        )
    kubeconfig = _kubeconfig(env)
    if kubeconfig is None:
        if mode == "auto":
            return NoCluster(NOT_CONFIGURED)
        return NoCluster("no kubeconfig: KUBECONFIG is not set and ~/.kube/config is missing")
    return _load(
        f"kubeconfig {kubeconfig}",
        lambda config: load_kube_config(
            config_file=kubeconfig, client_configuration=config, persist_config=False
        ),
        connections,
    )


def _load_in_cluster(config: Configuration, env: Mapping[str, str]) -> None:
    # kubernetes.config.load_incluster_config() with the environment passed in, not os.environ.
    loader = InClusterConfigLoader(
        token_filename=SERVICE_TOKEN_FILENAME, cert_filename=SERVICE_CERT_FILENAME, environ=env
    )
    loader.load_and_set(config)


def _kubeconfig(env: Mapping[str, str]) -> str | None:
    """KUBECONFIG as given (it may list several files), else ~/.kube/config if it exists."""
    listed = env.get("KUBECONFIG")
    if listed:
        return listed
    home = env.get("HOME") or os.path.expanduser("~")
    default = Path(home) / ".kube" / "config"
    return str(default) if default.is_file() else None


def _load(
    source: str, load: Callable[[Configuration], None], connections: int | None = None
) -> ApiClient | NoCluster:
    config = Configuration()
    try:
        load(config)
    except Exception as error:  # any broken configuration: start without namespace labels
        return NoCluster(f"could not load {source}: {' '.join(str(error).split())}")
    config.retries = RETRIES
    if connections is not None:
        # The client's pool holds five per CPU: calls past it would each open a connection,
        # and urllib3 would drop each one with a warning.
        config.connection_pool_maxsize = max(config.connection_pool_maxsize, connections)
    client = ApiClient(config)
    client.user_agent = USER_AGENT
    return client
