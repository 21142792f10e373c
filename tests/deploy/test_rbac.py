"""deploy/rbac.yaml grants exactly the requests `admitter run` makes, as read from the code
(rbac_usage.py): a verb granted and never used fails, and so does one used and not granted."""

import ast
import textwrap
from pathlib import Path

import pytest
import yaml
from rbac_usage import (
    KUBE_VERBS,
    Module,
    Reader,
    UnattributedRequest,
    kube_request_methods,
    used_requests,
    worker_requests,
)
from test_manifests import only

Triples = set[tuple[str, str, str]]
WORKER_ROLE = Path(__file__).parents[2] / "deploy" / "fleet-worker" / "rbac.yaml"


def granted(kind: str) -> Triples:
    """(apiGroup, resource, verb) triples a role grants."""
    return {
        (group, resource, verb)
        for rule in only(kind)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_roles_grant_exactly_the_requests_the_code_makes():
    used = used_requests()
    own_namespace = {t for t in used if t[1] in ("leases", "secrets")}
    cluster = used - own_namespace
    assert sorted(granted("ClusterRole") - cluster) == [], "granted, never used"
    assert sorted(cluster - granted("ClusterRole")) == [], "used, not granted"
    assert granted("Role") == own_namespace  # in admitter's namespace only, by the RoleBinding


def test_every_kube_method_that_reaches_the_api_server_has_a_verb():
    assert set(kube_request_methods()) == set(KUBE_VERBS)


def test_leader_election_asks_for_get_create_update_of_leases():
    assert {t for t in used_requests() if t[1] == "leases"} == {
        ("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")}


def module(source: str) -> Module:
    tree = ast.parse(textwrap.dedent(source))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    return Module("drift", tree, parents)


def read(source: str) -> Triples:
    return Reader([module(source)]).used()


def test_a_new_request_is_seen_through_constants_parameters_and_attributes():
    assert read("""
        class Cleaner:
            def __init__(self, client, kind):
                self.kube = client
                self.kind = kind
            async def sweep(self, name):
                await self.kube.patch(self.kind, name, {}, subresource="scale")
        def start(client):
            return Cleaner(client, kube.JOBS)
        class Labeller:
            async def label(self, kind):
                await self.kube.create(kind, {})
            async def caller(self):
                await self.label(kube.NODES)
                await self.kube.get(kube.WORKLOADS, "w", "ns")
    """) == {("batch", "jobs/scale", "patch"), ("", "nodes", "create"),
             ("admitter.dev", "workloads", "get")}


@pytest.mark.parametrize(
    "source, complaint",
    [
        ("async def f(self):\n    await self.kube.evict(kube.JOBS, 'x')", "no RBAC verb"),
        ("async def f(self, kinds):\n    await self.kube.get(kinds[0], 'x')", "cannot tell"),
        ("async def f(self, k):\n    await self.kube.get(k, 'x')", "nobody calls f"),
        ("async def f(self):\n    await self.kube.request('GET', '/api')", "no RBAC verb"),
        ("async def f(o):\n    await o.list_cluster_custom_object('g', 'v', 'jobs')",
         "not <Kind>.plural"),
    ],
)
def test_a_request_the_reader_cannot_attribute_fails_the_check(source, complaint):
    with pytest.raises(UnattributedRequest, match=complaint):
        read(source)


def test_the_worker_role_grants_exactly_what_the_manager_asks_of_a_worker():
    role = yaml.safe_load(WORKER_ROLE.read_text())
    granted_there = {(group, resource, verb) for rule in role["rules"]
                     for group in rule["apiGroups"] for resource in rule["resources"]
                     for verb in rule["verbs"]}
    assert granted_there == worker_requests()
