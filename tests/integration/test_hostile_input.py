"""Hostile input through the real API server: a table of must-reject objects and hypothesis-made
ones (ClusterQueues, LocalQueues, Topologies, Workloads, Jobs) sent by `mallory`, a user allowed
to write all of them, with admitter's webhooks registered from deploy/webhooks.yaml and the
controller running as its own process. Every one must be refused with a 4xx whose message names
the field; none may slip through or get a 500; and good Jobs are admitted before and after.
Hostile pods, which admitter does not validate, must not stop admission either."""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from hostile_world import CAP, TEST_LABEL, World, hostile_world
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from admitter.api.contract import QUEUE_LABEL as QUEUE
from admitter.api.duration import DURATION_PATTERN, format_duration
from admitter.kube import client as kube
from admitter.testing import RACK_LABEL, LocalCluster
from admitter.testing.waiting import wait_for

from builders.core import GPU
from builders.kube import JobWrapper, cluster_queue, local_queue, topology, workload

pytestmark = pytest.mark.integration

MERGE = "application/merge-patch+json"
EXAMPLES = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.fixture(scope="module")
def world(local_cluster: LocalCluster, admitter_crds: None,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with hostile_world(local_cluster, tmp_path_factory.mktemp("hostile")) as made:
        yield made


# ---- the table -------------------------------------------------------------------------------

Case = tuple[str, str, str, Any, str, str]
"""(what, method, path, body, a field the message must name, content type)."""


def _table(w: World, admitted_job: str, admitted_workload: str, queued_job: str) -> list[Case]:
    cqs, tops = kube.CLUSTER_QUEUES.path(), kube.TOPOLOGIES.path()
    lqs, wls = kube.LOCAL_QUEUES.path(w.namespace), kube.WORKLOADS.path(w.namespace)
    jobs = kube.JOBS.path(w.namespace)
    json_type = "application/json"

    def cq(what: str, field: str, **spec: Any) -> Case:
        name = f"{w.namespace}-bad-{secrets.token_hex(2)}"
        return (what, "POST", cqs, w.labelled(cluster_queue(name, parent=w.root, **spec)),
                field, json_type)

    def gpus(**knobs: Any) -> dict[str, Any]:
        return {GPU: knobs}

    def topo(what: str, field: str, *labels: str) -> Case:
        body = w.labelled(topology(f"{w.namespace}-bad-{secrets.token_hex(2)}", *labels))
        return (what, "POST", tops, body, field, json_type)

    def wl(what: str, field: str, **kwargs: Any) -> Case:
        body = workload(f"forged-{secrets.token_hex(2)}", **kwargs)
        return (what, "POST", wls, body, field, json_type)

    def job(what: str, field: str, queue: str = "default", pods: int = 1, memory: str = "1Gi",
            **annotations: str) -> Case:
        body = (JobWrapper(f"bad-{secrets.token_hex(2)}", w.namespace).queue(queue).pods(pods)
                .gpus(1).request("memory", memory).suspend(False).annotations(annotations).obj())
        return (what, "POST", jobs, body, field, json_type)

    def patch(what: str, path: str, body: Any, field: str) -> Case:
        return (what, "PATCH", path, body, field, MERGE)

    admitted_path = kube.JOBS.path(w.namespace, admitted_job)
    queued_path = kube.JOBS.path(w.namespace, queued_job)
    min_runtime, required = "admitter.dev/min-runtime", "admitter.dev/topology-required"
    return [
        cq("500m GPUs of quota", "quota", resources=gpus(quota="500m")),
        cq("1e30 GPUs of quota", "quota", resources=gpus(quota="1e30")),
        cq("2Ei GPUs of limit", "limit", resources=gpus(quota=1, limit="2Ei")),
        cq("a negative quota", "quota", resources=gpus(quota=-5)),
        cq("a limit below the quota", "limit", resources=gpus(quota=8, limit=4)),
        cq("overQuotaWeight 1e308", "overQuotaWeight", resources=gpus(overQuotaWeight=1e308)),
        cq("a negative weight", "overQuotaWeight", resources=gpus(overQuotaWeight=-1)),
        cq("a resource that is no name", "resources", resources={"GPU!!": {"quota": 1}}),
        cq("priority beyond int32", "priority", priority=2**40),
        cq("maxMinRuntime -0", "maxMinRuntime", maxMinRuntime="-0"),
        cq("maxMinRuntime 1e-7", "maxMinRuntime", maxMinRuntime="1e-7"),
        cq("maxMinRuntime 99999d", "maxMinRuntime", maxMinRuntime="99999d"),
        cq("an unknown key", "colour", colour="blue"),
        ("a missing parent", "POST", cqs,
         w.labelled(cluster_queue(f"{w.namespace}-orphan", parent="nowhere")), "parent",
         json_type),
        patch("a parent cycle", kube.CLUSTER_QUEUES.path(name=w.root),
              {"spec": {"parent": w.leaf}}, "parent"),
        ("deleting a parent", "DELETE", kube.CLUSTER_QUEUES.path(name=w.root), None, "parent",
         json_type),
        ("a LocalQueue on a missing ClusterQueue", "POST", lqs, local_queue("nowhere", name="lq"),
         "clusterQueue", json_type),
        ("a LocalQueue on a parent", "POST", lqs, local_queue(w.root, name="lq"), "clusterQueue",
         json_type),
        ("a LocalQueue on no name", "POST", lqs, local_queue("Not A Name", name="lq"),
         "clusterQueue", json_type),
        topo("the host before the rack", "levels", "kubernetes.io/hostname", RACK_LABEL),
        topo("the zone before the region", "levels", "topology.kubernetes.io/zone",
             "topology.kubernetes.io/region"),
        topo("a level twice", "levels", RACK_LABEL, RACK_LABEL),
        topo("no levels", "levels"),
        topo("a 400-character label", "nodeLabel", "r" * 400),
        topo("a unicode label", "nodeLabel", "räck"),
        topo("a shell label", "nodeLabel", "$(reboot)"),
        topo("a label with a newline", "nodeLabel", "rack\n"),
        wl("-64 GPUs", "requests", gpus=-64),
        wl("500m GPUs", "requests", gpus="500m"),
        wl("minRuntime 99999d", "minRuntime", minRuntime="99999d"),
        wl("minRuntime -0", "minRuntime", minRuntime="-0"),
        wl("minRuntime above the cap", "minRuntime", minRuntime="3h"),
        wl("an unknown queue", "queueName", queue="nowhere"),
        wl("an unknown topology level", "topology", topology={"required": "garbage"}),
        wl("a garbage topology level", "required", topology={"required": "$(reboot)"}),
        wl("no pods", "count", count=0),
        wl("a million pods", "count", count=10**6),
        wl("priority beyond int32", "priority", priority=2**40),
        patch("growing an admitted Workload", kube.WORKLOADS.path(w.namespace, admitted_workload),
              {"spec": {"podSets": [{"name": "main", "count": 40, "requests": {GPU: 1}}]}},
              "podSets"),
        job("an unknown LocalQueue", QUEUE, queue="nowhere"),
        job("min-runtime -0", min_runtime, **{min_runtime: "-0"}),
        job("min-runtime 1e-7", min_runtime, **{min_runtime: "1e-7"}),
        job("min-runtime 99999d", min_runtime, **{min_runtime: "99999d"}),
        job("min-runtime above the cap", min_runtime, **{min_runtime: "3h"}),
        job("an unknown topology level", required, **{required: "garbage"}),
        job("100001 pods", "spec.parallelism", pods=100_001),
        job("resumable maybe", "admitter.dev/resumable", **{"admitter.dev/resumable": "maybe"}),
        patch("unsuspending a queued Job", queued_path, {"spec": {"suspend": False}},
              "spec.suspend"),
        patch("forging the admitted mark", queued_path,
              {"metadata": {"annotations": {"admitter.dev/admitted-workload": "x"}}},
              "admitter.dev/admitted-workload"),
        # An Indexed Job may grow (parallelism and completions together): more pods at once.
        patch("raising an admitted Job's parallelism", admitted_path,
              {"spec": {"parallelism": 5, "completions": 5}}, "spec.parallelism"),
        patch("moving an admitted Job", admitted_path,
              {"metadata": {"labels": {QUEUE: "other"}}}, QUEUE),
        patch("unlabelling an admitted Job", admitted_path,
              {"metadata": {"labels": {QUEUE: None}}}, QUEUE),
    ]


def refusal_problem(w: World, case: Case) -> str | None:
    """None when `case` is refused with a 4xx naming its field, else what went wrong."""
    what, method, path, body, field, content_type = case
    status, answer = w.mallory.send(method, path, body, content_type)
    message = str(answer.get("message", answer))
    if status < 400:
        return f"{what}: accepted (HTTP {status})"
    if status >= 500:
        return f"{what}: HTTP {status}: {message}"
    if field not in message:
        return f"{what}: HTTP {status} without naming {field}: {message}"
    return None


# ---- generated inputs ----------------------------------------------------------------------

_QUALIFIED = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
_NAME = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)


def _is_label_key(key: str) -> bool:
    """Kubernetes' rule for label keys, as an oracle independent of admitter's code."""
    return _QUALIFIED.fullmatch(key) is not None and len(key.rpartition("/")[0]) <= 253


BAD_LABEL_KEYS = st.one_of(
    _TEXT.filter(lambda key: not _is_label_key(key)),
    st.integers(64, 300).map(lambda n: "r" * n),
    st.integers(254, 400).map(lambda n: "a" * n + "/rack"),
)
FRACTIONAL = st.one_of(st.integers(1, 999).map(lambda m: f"{m}m"),
                       st.tuples(st.integers(0, 99), st.integers(1, 9)).map(
                           lambda t: f"{t[0]}.{t[1]}"))
OUT_OF_RANGE = st.one_of(st.integers(19, 300).map(lambda e: f"1e{e}"),
                         st.integers(2**60 + 1, 2**80))
BAD_DURATIONS = st.one_of(
    st.from_regex(r"-[0-9]{1,5}(\.[0-9]{1,3})?[smhd]?", fullmatch=True),
    st.from_regex(r"[0-9]{1,3}(\.[0-9])?[eE][-+]?[0-9]{1,2}", fullmatch=True),
    st.integers(3651, 10**7).map(lambda days: f"{days}d"),
    _TEXT.filter(lambda text: not re.fullmatch(DURATION_PATTERN, text.strip())),
)
ABOVE_CAP = st.integers(CAP + 1, 3650 * 86400).map(format_duration)


def generated_refusals(w: World) -> dict[str, int]:
    """Run every generator against the API server; a slip fails with the smallest example."""
    tried: dict[str, int] = {}

    def refused(what: str, method: str, path: str, body: Any, field: str) -> None:
        tried[what] = tried.get(what, 0) + 1
        assert refusal_problem(w, (what, method, path, body, field, "application/json")) is None

    def name() -> str:
        return f"{w.namespace}-gen-{secrets.token_hex(3)}"

    @EXAMPLES
    @given(st.one_of(
        FRACTIONAL.map(lambda q: ({GPU: {"quota": q}}, "quota")),
        OUT_OF_RANGE.map(lambda q: ({GPU: {"quota": q}}, "quota")),
        st.integers(-10**9, -2).map(lambda q: ({GPU: {"quota": q}}, "quota")),
        st.one_of(st.floats(1e6, 1e308, exclude_min=True), st.floats(-1e308, -1e-9)).map(
            lambda weight: ({GPU: {"overQuotaWeight": weight}}, "overQuotaWeight")),
    ), st.one_of(st.none(), BAD_DURATIONS, _NAME.map(lambda n: f"missing-{n}")))
    def cluster_queues(resources: tuple[dict[str, Any], str], other: str | None) -> None:
        knobs, field = resources
        queue = cluster_queue(name(), parent=w.root, resources=knobs)
        refused("ClusterQueue", "POST", kube.CLUSTER_QUEUES.path(), w.labelled(queue), field)
        if other is not None:  # one more bad field, alone: a bad cap or a missing parent
            bad = cluster_queue(name(), parent=other if other.startswith("missing-") else w.root)
            if not other.startswith("missing-"):
                bad["spec"]["maxMinRuntime"] = other
            field = "parent" if other.startswith("missing-") else "maxMinRuntime"
            refused("ClusterQueue", "POST", kube.CLUSTER_QUEUES.path(), w.labelled(bad), field)

    @EXAMPLES
    @given(BAD_LABEL_KEYS, st.permutations([RACK_LABEL, "kubernetes.io/hostname",
                                             "example.com/block"]))
    def topologies(label: str, order: list[str]) -> None:
        refused("Topology", "POST", kube.TOPOLOGIES.path(),
                w.labelled(topology(name(), RACK_LABEL, label)), "nodeLabel")
        if order[-1] != "kubernetes.io/hostname":
            refused("Topology", "POST", kube.TOPOLOGIES.path(),
                    w.labelled(topology(name(), *order)), "levels")

    @EXAMPLES
    @given(_NAME)
    def local_queues(missing: str) -> None:
        for target in (f"missing-{missing}", w.root):
            refused("LocalQueue", "POST", kube.LOCAL_QUEUES.path(w.namespace),
                    local_queue(target, name=f"gen-{secrets.token_hex(3)}"), "clusterQueue")

    @EXAMPLES
    @given(st.one_of(
        st.integers(-10**9, -1).map(lambda g: ({"gpus": g}, "requests")),
        FRACTIONAL.map(lambda g: ({"gpus": g}, "requests")),
        OUT_OF_RANGE.map(lambda g: ({"gpus": g}, "requests")),
        st.one_of(BAD_DURATIONS, ABOVE_CAP).map(lambda d: ({"minRuntime": d}, "minRuntime")),
        _NAME.map(lambda q: ({"queue": f"missing-{q}"}, "queueName")),
        BAD_LABEL_KEYS.map(lambda key: ({"topology": {"preferred": key}}, "preferred")),
        _NAME.map(lambda n: ({"topology": {"required": f"unknown.example/{n}"}}, "topology")),
        st.one_of(st.integers(max_value=0), st.integers(min_value=100_001)).map(
            lambda c: ({"count": c}, "count")),
    ))
    def workloads(edit: tuple[dict[str, Any], str]) -> None:
        kwargs, field = edit
        refused("Workload", "POST", kube.WORKLOADS.path(w.namespace),
                workload(f"gen-{secrets.token_hex(3)}", **kwargs), field)

    min_runtime, required = "admitter.dev/min-runtime", "admitter.dev/topology-required"

    @EXAMPLES
    @given(st.one_of(
        st.one_of(BAD_DURATIONS, ABOVE_CAP).map(lambda d: ({min_runtime: d}, min_runtime)),
        _NAME.map(lambda n: ({required: f"unknown.example/{n}"}, required)),
        _TEXT.filter(lambda t: t not in ("true", "false")).map(
            lambda t: ({"admitter.dev/resumable": t}, "admitter.dev/resumable")),
        _NAME.map(lambda q: ({QUEUE: f"missing-{q}"}, QUEUE)),
    ))
    def jobs(edit: tuple[dict[str, str], str]) -> None:
        values, field = edit
        job = (JobWrapper(f"gen-{secrets.token_hex(3)}", w.namespace)
               .queue(values.pop(QUEUE, "default")).gpus(1).annotations(values).obj())
        refused("Job", "POST", kube.JOBS.path(w.namespace), job, field)

    for generator in (cluster_queues, topologies, local_queues, workloads, jobs):
        generator()
    return tried


def hostile_pods(w: World) -> int:
    """Bare pods bound to a node that does not exist, labelled and annotated as if queued:
    admitter neither manages nor validates them, and must go on admitting."""
    made = 0

    @EXAMPLES
    @given(st.integers(0, 64), st.integers(0, 10**6), st.integers(0, 2**40),
           st.dictionaries(st.sampled_from(["admitter.dev/min-runtime",
                                            "admitter.dev/resumable",
                                            "admitter.dev/topology-required"]), _TEXT,
                           max_size=3),
           st.sampled_from(["default", "nowhere"]))
    def pods(gpus: int, millicores: int, memory: int, annotations: dict[str, str],
             queue: str) -> None:
        nonlocal made
        requests = {GPU: str(gpus), "cpu": f"{millicores}m", "memory": str(memory)}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"gen-{secrets.token_hex(3)}", "labels": {QUEUE: queue},
                            "annotations": annotations},
               "spec": {"nodeName": f"{w.namespace}-nowhere",
                        "containers": [{"name": "main", "image": "registry.invalid/x",
                                        "resources": {"requests": requests,
                                                      "limits": {GPU: str(gpus)}}}]}}
        status, answer = w.mallory.send("POST", kube.PODS.path(w.namespace), pod)
        assert status < 500, answer
        made += status < 300

    pods()
    return made


# ---- the test ------------------------------------------------------------------------------


@contextlib.contextmanager
def stored_past_the_webhooks(w: World) -> Iterator[None]:
    """A parent cycle (two concurrent re-parentings can each pass the webhook) and a
    ClusterQueue with 500m GPUs (stored before the bound existed), written without the test
    label that routes objects to the webhooks here; the controller must keep admitting."""
    bypass = "admitter.dev/hostile-bypass"
    a, b = f"{w.namespace}-cycle-a", f"{w.namespace}-cycle-b"
    stored = [cluster_queue(a, parent=b), cluster_queue(b, parent=a),
              cluster_queue(f"{w.namespace}-fraction", resources={GPU: {"quota": "500m"}})]
    admin = w.cluster.api()
    try:
        for queue in stored:
            queue["metadata"]["labels"] = {bypass: w.namespace}
            admin.request("POST", kube.CLUSTER_QUEUES.path(), queue)
        yield
    finally:
        w.cluster.kubectl("delete", "clusterqueues", "-l", f"{bypass}={w.namespace}",
                          "--wait=false", check=False)



def test_every_hostile_input_is_refused_naming_its_field_and_admission_goes_on(
        world: World) -> None:
    w = world
    jobs = kube.JOBS.path(w.namespace)
    for name, gpus in (("good-before", 1), ("queued", 64)):  # 64 GPUs: no node has them
        job = JobWrapper(name, w.namespace).gpus(gpus).obj()
        job["spec"]["completionMode"] = "Indexed"
        status, answer = w.mallory.send("POST", jobs, job)
        assert status == 201, answer
    wait_for(lambda: w.admitted("good-before"), 60, "the first good Job to be admitted")
    workload_name = w.job("good-before")["metadata"]["annotations"][
        "admitter.dev/admitted-workload"]

    table = _table(w, "good-before", workload_name, "queued")
    slipped = [problem for case in table if (problem := refusal_problem(w, case)) is not None]
    assert slipped == [], f"{len(slipped)} of {len(table)} must-reject inputs: {slipped}"
    assert len(table) >= 50

    tried = generated_refusals(w)  # each generator fails on its first slip
    assert set(tried) == {"ClusterQueue", "Topology", "LocalQueue", "Workload", "Job"}
    assert hostile_pods(w) > 0

    with stored_past_the_webhooks(w):  # what a race, or the time before the webhook, leaves
        status, answer = w.mallory.send("POST", jobs,
                                        JobWrapper("good-after", w.namespace).gpus(1).obj())
        assert status == 201, answer
        wait_for(lambda: w.admitted("good-after"), 60, "a good Job to be admitted afterwards")

    assert w.job("good-before")["spec"]["parallelism"] == 1
    assert not w.admitted("queued")
    selector = f"?labelSelector={TEST_LABEL}%3D{w.namespace}"
    queues = w.get(kube.CLUSTER_QUEUES.path() + selector)["items"]
    assert sorted(q["metadata"]["name"] for q in queues) == sorted([w.root, w.leaf])
    assert len(w.get(kube.TOPOLOGIES.path() + selector)["items"]) == 1
    assert [lq["metadata"]["name"] for lq in
            w.get(kube.LOCAL_QUEUES.path(w.namespace))["items"]] == ["default"]
    owners = [wl["metadata"].get("ownerReferences", [{}])[0].get("name")
              for wl in w.get(kube.WORKLOADS.path(w.namespace))["items"]]
    assert sorted(owners) == ["good-after", "good-before", "queued"]
