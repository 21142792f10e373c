"""deploy/user-roles.yaml: what the built-in view/edit/admin roles gain from admitter is reading
queues and Workloads, never writing them; batch-user submits queued work and batch-admin manages
queues, each reading what the viewers read; no role a release makes is aggregated (the
aggregation controller would recreate it as the release is uninstalled)."""

from typing import Any

from test_manifests import USER_ROLES

from admitter.jobs.registry import SUSPENDABLE

BUILT_IN = {f"rbac.authorization.k8s.io/aggregate-to-{role}" for role in ("view", "edit", "admin")}
READ = {"get", "list", "watch"}
Grants = set[tuple[str, str, str]]


def role(name: str) -> dict[str, Any]:
    (found,) = [d for d in USER_ROLES if d["metadata"]["name"] == name]
    return found


def grants(name: str) -> Grants:
    """(apiGroup, resource, verb) triples the role grants."""
    return {(group, resource, verb) for rule in role(name)["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def written(name: str) -> set[tuple[str, str]]:
    return {(group, resource) for group, resource, verb in grants(name) if verb not in READ}


def test_the_built_in_roles_gain_only_reading_of_admitters_kinds():
    gained = [d for d in USER_ROLES if BUILT_IN & set(d["metadata"]["labels"])]
    assert [d["metadata"]["name"] for d in gained] == ["admitter-queue-viewer"]
    assert {verb for _, _, verb in grants("admitter-queue-viewer")} <= READ


def test_no_role_is_aggregated_so_an_uninstall_removes_it():
    assert [d["metadata"]["name"] for d in USER_ROLES if "aggregationRule" in d] == []
    assert all(d["rules"] for d in USER_ROLES)


def test_batch_user_reads_queues_and_submits_jobs_but_writes_no_queue():
    """It may write every kind admitter queues, and nothing else."""
    assert grants("admitter-queue-viewer") <= grants("admitter-batch-user")
    assert written("admitter-batch-user") == {(kind.api_version.rpartition("/")[0], kind.plural)
                                              for kind in SUSPENDABLE.values()}


def test_batch_admin_manages_queues_and_topologies_but_no_status():
    assert {resource for _, resource in written("admitter-batch-admin")} == {
        "clusterqueues", "localqueues", "topologies"}


def test_the_clusterqueue_viewer_only_reads_and_batch_admin_reads_all_it_does():
    """So every plugin command works for the platform team bound to batch-admin."""
    viewer = grants("admitter-clusterqueue-viewer")
    assert {verb for _, _, verb in viewer} == READ
    assert {("admitter.dev", "clusterqueues", "list"), ("", "nodes", "list")} <= viewer
    assert viewer <= grants("admitter-batch-admin")
