"""`python -m tests.soak.distinct_pods [--reviews N] [--bound MIB]`: the real server answers N
reviews of pods that all differ where the engine reads (so none is answered from the outcome
cache), and each worker's resident memory is read as they go; exit 1 when a worker grows past
`--bound` MiB."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.memory import rss_mib
from tests.support.kept_alive import KeptAlive
from tests.support.server import FRACTIONAL_POD_REVIEW, REPO_ROOT, WebhookServer

CLIENTS = 4
READINGS = 10


def distinct_review(index: int) -> bytes:
    review: dict[str, Any] = json.loads(FRACTIONAL_POD_REVIEW.read_text())
    request = review["request"]
    request["uid"] = f"soak-{index}"
    pod = request["object"]
    container = pod["spec"]["containers"][0]
    # Where the engine reads: the container's name and env, and an annotation of the pod.
    container["name"] = f"worker-{index}"
    container.setdefault("env", []).append({"name": "SHARD", "value": str(index)})
    pod["metadata"].setdefault("annotations", {})["soak/index"] = f"{index:08d}" * 32
    return json.dumps(review).encode()


def post(server: WebhookServer, indices: range, failures: list[str]) -> None:
    client = KeptAlive(server)
    try:
        for index in indices:
            body = distinct_review(index)
            client.https.request("POST", "/mutate", body, {"Content-Type": "application/json"})
            response = client.https.getresponse()
            answer = json.loads(response.read())["response"]
            if response.status != 200 or answer["uid"] != f"soak-{index}":
                failures.append(f"review {index}: HTTP {response.status}")
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak.distinct_pods")
    parser.add_argument("--reviews", type=int, default=1_000_000)
    parser.add_argument("--bound", type=float, default=120.0, help="MiB per worker")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        server = WebhookServer(
            REPO_ROOT / "policies", directory / "certs", directory / "gunicorn.log", {}
        )
        server.start()
        try:
            return _soak(server, args.reviews, args.bound)
        finally:
            server.stop()


def _soak(server: WebhookServer, reviews: int, bound: float) -> int:
    failures: list[str] = []
    started = time.monotonic()
    largest: dict[int, float] = {}
    step = max(reviews // READINGS, 1)
    for first in range(0, reviews, step):
        last = min(first + step, reviews)
        share = -(-(last - first) // CLIENTS)
        threads = [
            threading.Thread(
                target=post,
                args=(server, range(start, min(start + share, last)), failures),
            )
            for start in range(first, last, share)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        readings = {pid: rss_mib(pid) for pid in server.worker_pids()}
        for pid, mib in readings.items():
            if mib is not None:
                largest[pid] = max(largest.get(pid, 0.0), mib)
        shown = ", ".join(f"{pid}: {mib:.1f} MiB" for pid, mib in readings.items() if mib)
        rate = last / (time.monotonic() - started)
        print(f"{last:>9,} reviews, {rate:,.0f}/s; worker RSS {shown}", flush=True)
    peak = max(largest.values(), default=0.0)
    print(
        f"{reviews:,} distinct pods: {len(failures)} failures, largest worker RSS {peak:.1f} MiB "
        f"(bound {bound:g} MiB)"
    )
    for failure in failures[:10]:
        print(f"  {failure}")
    return 1 if failures or peak > bound else 0


if __name__ == "__main__":
    sys.exit(main())
