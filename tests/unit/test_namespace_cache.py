"""The namespace label cache against a fake kube-apiserver, through the real kubernetes client
configured from a kubeconfig file."""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_apiserver import FakeApiServer
from tests.support.waiting import eventually
from webhook.kube.client_config import api_client, namespace_label_source
from webhook.kube.informer import Backoff
from webhook.kube.namespace_cache import NamespaceLabelCache
from webhook.policy.namespace_labels import LabelLookup, NoCluster

pytestmark = pytest.mark.usefixtures("no_proxy")

TOKEN = "test-token"
NAME_LABEL = "kubernetes.io/metadata.name"
NOWHERE = LabelLookup.unknown("not cached")

MakeCache = Callable[..., NamespaceLabelCache]


def labels(lookup: LabelLookup) -> dict[str, str] | None:
    if lookup.labels is None:
        return None
    return {key: value for key, value in lookup.labels.items() if key != NAME_LABEL}


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(token=TOKEN) as server:
        server.add_namespace("team-a", {"gpu-tier": "shared"})
        server.add_namespace("team-b", {"gpu-tier": "dedicated"})
        yield server


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> Path:
    return api.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def make_cache(kubeconfig: Path) -> Iterator[MakeCache]:
    caches: list[NamespaceLabelCache] = []

    def make(*, start: bool = True, **options: Any) -> NamespaceLabelCache:
        client = api_client("kubeconfig", environ={"KUBECONFIG": str(kubeconfig)})
        assert not isinstance(client, NoCluster), client.reason
        options.setdefault("backoff", Backoff(initial=0.02, maximum=0.1))
        cache = NamespaceLabelCache(client, **options)
        caches.append(cache)
        if start:
            cache.start()
            assert cache.wait_synced(5)
        return cache

    yield make
    for cache in caches:
        cache.stop()


def watching(api: FakeApiServer) -> bool:
    return api.open_watches() == 1


# --- the informer ----------------------------------------------------------------------------


def test_one_list_fills_the_cache_and_a_watch_follows_from_its_version(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache(watch_timeout=120)
    eventually(lambda: watching(api))

    assert labels(cache.labels_of("team-a")) == {"gpu-tier": "shared"}
    assert labels(cache.labels_of("team-b")) == {"gpu-tier": "dedicated"}
    named = cache.labels_of("team-a").labels
    assert named is not None and named[NAME_LABEL] == "team-a"
    assert len(api.lists()) == 1
    assert api.reads() == []
    (watch,) = api.watches()
    assert watch.path == "/api/v1/namespaces"
    assert watch.query == {
        "watch": "true",
        "resourceVersion": api.resource_version,
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "120",
    }


def test_a_label_change_arrives_by_watch_without_another_request(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache()
    eventually(lambda: watching(api))
    before = len(api.requests())

    api.set_labels("team-a", {"gpu-tier": "dedicated", "team": "a"})
    api.add_namespace("team-c", {"gpu-tier": "shared"})
    api.delete_namespace("team-b")

    # cached() does not fall back to a read, so only the watch can make these true.
    eventually(lambda: cache.cached("team-b") is None)
    assert labels(cache.cached("team-a") or NOWHERE) == {"gpu-tier": "dedicated", "team": "a"}
    assert labels(cache.cached("team-c") or NOWHERE) == {"gpu-tier": "shared"}
    assert labels(cache.labels_of("team-c")) == {"gpu-tier": "shared"}
    assert len(api.requests()) == before


def test_a_watch_that_times_out_resumes_from_the_bookmark_without_a_list(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    make_cache(watch_timeout=1)
    eventually(lambda: watching(api))
    moved_to = api.advance(7)

    second = eventually(lambda: api.watches()[1:], timeout=4)[0]

    assert second.query["resourceVersion"] == moved_to
    assert len(api.lists()) == 1


def test_a_namespace_the_watch_has_not_delivered_is_read_once_then_cached(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache()
    eventually(lambda: watching(api))

    with api.delayed_watch_events():
        api.add_namespace("fresh", {"gpu-tier": "shared"})
        first = cache.labels_of("fresh")
        second = cache.labels_of("fresh")

    assert labels(first) == labels(second) == {"gpu-tier": "shared"}
    assert len(api.reads("fresh")) == 1
    assert len(api.reads()) == 1


def test_concurrent_misses_for_one_namespace_share_one_read(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache(start=False, lookup_timeout=3.0)
    api.add_namespace("busy", {"gpu-tier": "shared"})
    start = threading.Barrier(8)
    answers: list[LabelLookup] = []

    def admit() -> None:
        start.wait()
        answers.append(cache.labels_of("busy"))

    threads = [threading.Thread(target=admit) for _ in range(8)]
    with api.stalled_reads():
        for thread in threads:
            thread.start()
        eventually(lambda: api.reads("busy"))
        time.sleep(0.2)  # the other seven reach labels_of() while the first read is held
        assert len(api.reads("busy")) == 1
    for thread in threads:
        thread.join(5)

    assert [labels(answer) for answer in answers] == [{"gpu-tier": "shared"}] * 8
    assert len(api.reads("busy")) == 1


def test_a_read_that_answers_late_does_not_undo_a_newer_watch_event(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache(lookup_timeout=3.0)
    eventually(lambda: watching(api))
    answers: list[LabelLookup] = []
    admission = threading.Thread(target=lambda: answers.append(cache.labels_of("race")))

    with api.stalled_reads():
        with api.delayed_watch_events():
            api.add_namespace("race", {"gpu-tier": "shared"})
            admission.start()
            eventually(lambda: api.reads("race"))  # read while the labels were "shared"
            api.set_labels("race", {"gpu-tier": "dedicated"})
        # Asking labels_of() here would wait for the held read; the watch is applied first.
        eventually(lambda: labels(cache.cached("race") or NOWHERE) == {"gpu-tier": "dedicated"})
    admission.join(5)

    assert [labels(answer) for answer in answers] == [{"gpu-tier": "dedicated"}]
    assert labels(cache.labels_of("race")) == {"gpu-tier": "dedicated"}


def test_a_missing_namespace_is_unknown_because_it_does_not_exist(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache()
    eventually(lambda: watching(api))

    lookup = cache.labels_of("ghost")

    assert lookup == LabelLookup.unknown("namespace ghost does not exist")
    assert [r.path for r in api.reads()] == ["/api/v1/namespaces/ghost"]
    assert cache.labels_of("").labels is None
    assert len(api.requests()) == 3  # the list, the watch and the one read


def test_an_answer_in_the_cache_costs_no_request_and_microseconds(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache()
    before = len(api.requests())

    started = time.perf_counter()
    for _ in range(10_000):
        cache.labels_of("team-a")
    elapsed = time.perf_counter() - started

    assert elapsed < 0.1, f"{elapsed / 10_000 * 1e6:.1f} µs a lookup"
    assert len(api.requests()) == before


# --- when the API fails ----------------------------------------------------------------------


def test_with_the_api_down_the_cache_answers_and_misses_are_quick(
    api: FakeApiServer, make_cache: MakeCache, caplog: pytest.LogCaptureFixture
) -> None:
    cache = make_cache()
    caplog.set_level(logging.DEBUG, logger="webhook")
    api.stop()

    assert labels(cache.labels_of("team-a")) == {"gpu-tier": "shared"}
    started = time.monotonic()
    missing = cache.labels_of("team-new")
    assert time.monotonic() - started < 0.5
    assert missing.labels is None
    assert missing.unknown_because == "the Kubernetes API did not answer: connection refused"
    eventually(lambda: "API failed" in caplog.text)
    time.sleep(0.3)  # several informer retries at the test's backoff
    outage_warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "API failed" in r.message
    ]
    assert len(outage_warnings) == 1
    assert labels(cache.labels_of("team-b")) == {"gpu-tier": "dedicated"}


def test_a_read_that_hangs_gives_up_in_time_and_the_failure_is_remembered(
    api: FakeApiServer, make_cache: MakeCache
) -> None:
    cache = make_cache(lookup_timeout=0.3, failure_memory=30.0)

    with api.stalled_reads():
        started = time.monotonic()
        first = cache.labels_of("slow")
        waited = time.monotonic() - started
        started = time.monotonic()
        again = cache.labels_of("slow")
        other = cache.labels_of("other")
        remembered_in = time.monotonic() - started

    assert 0.25 < waited < 1.0
    assert remembered_in < 0.05
    assert first.unknown_because == "the Kubernetes API did not answer: timed out"
    assert again == other == first
    assert [r.path for r in api.reads()] == ["/api/v1/namespaces/slow"]
    assert labels(cache.labels_of("team-a")) == {"gpu-tier": "shared"}


def test_a_remembered_failure_expires(api: FakeApiServer, make_cache: MakeCache) -> None:
    now = [100.0]
    cache = make_cache(lookup_timeout=0.2, failure_memory=5.0, clock=lambda: now[0])

    with api.delayed_watch_events():
        with api.stalled_reads():
            assert cache.labels_of("late").labels is None
        api.add_namespace("late", {"gpu-tier": "shared"})
        assert cache.labels_of("late").labels is None
        assert len(api.reads("late")) == 1
        now[0] += 5.1

        assert labels(cache.labels_of("late")) == {"gpu-tier": "shared"}
        assert len(api.reads("late")) == 2


def test_the_informer_lists_again_when_the_api_comes_back(
    api: FakeApiServer, make_cache: MakeCache, caplog: pytest.LogCaptureFixture
) -> None:
    cache = make_cache()
    eventually(lambda: watching(api))
    caplog.set_level(logging.INFO, logger="webhook")

    api.stop()
    eventually(lambda: "API failed" in caplog.text)
    api.set_labels("team-a", {"gpu-tier": "dedicated"})  # while no apiserver answers
    api.start()

    eventually(lambda: labels(cache.labels_of("team-a")) == {"gpu-tier": "dedicated"})
    assert len(api.lists()) == 2
    eventually(lambda: watching(api))
    api.set_labels("team-b", {"gpu-tier": "shared"})
    eventually(lambda: labels(cache.labels_of("team-b")) == {"gpu-tier": "shared"})
    assert "answers again" in caplog.text


def test_an_expired_watch_leads_to_a_new_list(
    api: FakeApiServer, make_cache: MakeCache, caplog: pytest.LogCaptureFixture
) -> None:
    listed_at = api.resource_version
    cache = make_cache()
    eventually(lambda: watching(api))
    api.set_labels("team-a", {"gpu-tier": "dedicated"})
    eventually(lambda: labels(cache.labels_of("team-a")) == {"gpu-tier": "dedicated"})
    seen = api.resource_version

    # Made while no watch is open, then gone from the watch history: only a new list has it.
    api.expire_watches(lambda: api.set_labels("team-a", {"gpu-tier": "exclusive"}))

    eventually(lambda: labels(cache.labels_of("team-a")) == {"gpu-tier": "exclusive"})
    eventually(lambda: watching(api))
    relisted_at = api.resource_version
    calls = [(r.is_list, r.query.get("resourceVersion")) for r in api.requests()]
    assert calls == [
        (True, None),
        (False, listed_at),
        (False, seen),  # resumed where it was and refused with 410 Expired
        (True, None),
        (False, relisted_at),
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_stop_returns_promptly_with_a_watch_open(api: FakeApiServer, make_cache: MakeCache) -> None:
    cache = make_cache(watch_timeout=300)
    eventually(lambda: watching(api))

    started = time.monotonic()
    cache.stop()

    assert time.monotonic() - started < 1.0
    eventually(lambda: api.open_watches() == 0)


# --- the fake answers as the API does ---------------------------------------------------------


def fake_get(api: FakeApiServer, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", api.port, timeout=5)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_the_fake_answers_not_found_and_expired_in_the_api_shapes(api: FakeApiServer) -> None:
    code, body = fake_get(api, "/api/v1/namespaces/ghost")
    assert code == 404
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'namespaces "ghost" not found',
        "reason": "NotFound",
        "details": {"name": "ghost", "kind": "namespaces"},
        "code": 404,
    }

    api.expire_watches()
    code, body = fake_get(api, "/api/v1/namespaces?watch=true&resourceVersion=1000")
    assert code == 200
    (line,) = body.decode().splitlines()
    event = json.loads(line)
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    assert event["object"]["message"].startswith("too old resource version: 1000 (")


# --- choosing the API ------------------------------------------------------------------------


def test_off_is_no_cluster() -> None:
    source = namespace_label_source("off", environ={})

    assert source == NoCluster("namespace label lookup is off (NAMESPACE_LABELS=off)")


def test_auto_without_cluster_or_kubeconfig_is_no_cluster(tmp_path: Path) -> None:
    source = namespace_label_source("auto", environ={"HOME": str(tmp_path)})

    reason = "no Kubernetes API is configured (not in a cluster, no kubeconfig)"
    assert source == NoCluster(reason)
    assert source.labels_of("team-a") == LabelLookup.unknown(reason)


@pytest.mark.parametrize("mode", ["auto", "kubeconfig"])
def test_a_kubeconfig_gives_a_working_cache(
    api: FakeApiServer, kubeconfig: Path, mode: str
) -> None:
    source = namespace_label_source(mode, environ={"KUBECONFIG": str(kubeconfig), "HOME": "/nx"})
    try:
        assert isinstance(source, NamespaceLabelCache)
        assert source.wait_synced(5)
        assert labels(source.labels_of("team-a")) == {"gpu-tier": "shared"}
    finally:
        if isinstance(source, NamespaceLabelCache):
            source.stop()


def test_the_kubeconfig_in_home_is_found(api: FakeApiServer, tmp_path: Path) -> None:
    api.write_kubeconfig(tmp_path / ".kube" / "config")

    source = namespace_label_source("auto", environ={"HOME": str(tmp_path)})
    try:
        assert isinstance(source, NamespaceLabelCache)
        assert source.wait_synced(5)
    finally:
        if isinstance(source, NamespaceLabelCache):
            source.stop()


def test_a_bad_kubeconfig_is_no_cluster_with_the_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncurrent-context: nowhere\n")

    source = namespace_label_source("kubeconfig", environ={"KUBECONFIG": str(broken)})

    assert isinstance(source, NoCluster)
    assert source.reason.startswith(f"could not load kubeconfig {broken}: ")
    assert "nowhere" in source.reason
    assert source.reason in caplog.text


def test_kubeconfig_mode_without_a_kubeconfig_is_no_cluster(tmp_path: Path) -> None:
    source = namespace_label_source("kubeconfig", environ={"HOME": str(tmp_path)})

    assert isinstance(source, NoCluster)
    assert "no kubeconfig" in source.reason


@pytest.mark.parametrize(
    "mode, environ",
    [
        ("in-cluster", {}),
        ("auto", {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"}),
    ],
)
def test_in_cluster_without_a_service_account_is_no_cluster(
    mode: str, environ: dict[str, str]
) -> None:
    source = namespace_label_source(mode, environ=environ)

    assert isinstance(source, NoCluster)
    assert source.reason.startswith("could not load the in-cluster configuration: ")


def test_an_unknown_mode_is_refused_naming_the_modes() -> None:
    with pytest.raises(ValueError, match="'auto', 'in-cluster', 'kubeconfig', 'off'"):
        namespace_label_source("sometimes")
