"""deploy/user-roles.yaml: what the built-in view/edit/admin roles gain from admitter is reading
queues and Workloads, never writing them; batch-user and batch-admin collect their parts."""

from typing import Any

from test_manifests import USER_ROLES

from admitter.jobs.registry import SUSPENDABLE

BUILT_IN = {f"rbac.authorization.k8s.io/aggregate-to-{role}" for role in ("view", "edit", "admin")}
READ = {"get", "list", "watch"}


def role(name: str) -> dict[str, Any]:
    (found,) = [d for d in USER_ROLES if d["metadata"]["name"] == name]
    return found


def aggregated_into(selector_label: str) -> list[dict[str, Any]]:
    return [d for d in USER_ROLES if d["metadata"]["labels"].get(selector_label) == "true"]


def test_the_built_in_roles_gain_only_reading_of_admitters_kinds():
    gained = [d for d in USER_ROLES if BUILT_IN & set(d["metadata"]["labels"])]
    assert [d["metadata"]["name"] for d in gained] == ["admitter-queue-viewer"]
    for rule in gained[0]["rules"]:
        assert set(rule["verbs"]) <= READ, rule


def test_batch_user_reads_queues_and_submits_jobs_but_writes_no_queue():
    """It may write every kind admitter queues, and nothing else."""
    (selector,) = role("admitter-batch-user")["aggregationRule"]["clusterRoleSelectors"]
    (label,) = selector["matchLabels"]
    rules = [rule for d in aggregated_into(label) for rule in d["rules"]]
    writes = {(group, resource) for rule in rules if set(rule["verbs"]) - READ
              for group in rule["apiGroups"] for resource in rule["resources"]}
    assert writes == {(kind.api_version.rpartition("/")[0], kind.plural)
                      for kind in SUSPENDABLE.values()}


def test_batch_admin_manages_queues_and_topologies_but_no_status():
    (selector,) = role("admitter-batch-admin")["aggregationRule"]["clusterRoleSelectors"]
    (label,) = selector["matchLabels"]
    rules = [rule for d in aggregated_into(label) for rule in d["rules"]]
    writes = {resource for rule in rules if "patch" in rule["verbs"]
              for resource in rule["resources"]}
    assert writes == {"clusterqueues", "localqueues", "topologies"}
