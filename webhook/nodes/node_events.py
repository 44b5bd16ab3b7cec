"""core/v1 Events about the nodes the advertiser changes or skips, so that `kubectl describe node`
shows them. An Event about a cluster-scoped object lives in namespace `default`. Events are a
courtesy: when the API refuses them, that is logged once and the advertiser goes on."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from webhook.kube import raw_json
from webhook.kube.api_errors import HTTP_FORBIDDEN, short_reason

log = logging.getLogger("webhook")

EVENT_NAMESPACE = "default"
COMPONENT = "gpu-vram-advertiser"
EVENT_TIMEOUT = (5.0, 5.0)
MESSAGE_LIMIT = 1024


class NodeEvents:
    def __init__(self, core: CoreV1Api, identity: str) -> None:
        self._core = core
        self._identity = identity
        self._broken = False

    def advertised(self, node: str, message: str) -> None:
        self._record(node, "Normal", "VRAMAdvertised", message)

    def skipped(self, node: str, message: str) -> None:
        self._record(node, "Warning", "VRAMNotAdvertised", message)

    def _record(self, node: str, kind: str, reason: str, message: str) -> None:
        if self._broken:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{node}.{uuid.uuid4().hex[:16]}", "namespace": EVENT_NAMESPACE},
            # The kubelet, too, names a node's uid by its name in the events it records.
            "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": node, "uid": node},
            "type": kind,
            "reason": reason,
            "message": message[:MESSAGE_LIMIT],
            "source": {"component": COMPONENT, "host": self._identity},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._identity,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            raw_json.call(
                self._core.create_namespaced_event,
                EVENT_NAMESPACE,
                body,
                _request_timeout=EVENT_TIMEOUT,
            )
        except ApiException as error:
            if error.status != HTTP_FORBIDDEN:
                log.debug("nodes: an event about node %s was lost: %s", node, short_reason(error))
                return
            self._broken = True
            log.warning(
                "nodes: events about nodes cannot be recorded (%s); going on without them "
                "(grant create on events in namespace %s)",
                short_reason(error),
                EVENT_NAMESPACE,
            )
        except Exception as error:  # events are a courtesy; the patch is what counts
            log.debug("nodes: an event about node %s was lost: %s", node, short_reason(error))
