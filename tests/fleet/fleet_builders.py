"""A manager's Fleet with WorkerClusters observed and nothing connected, for the fleet's unit
tests."""

from kubernetes_asyncio import client

from admitter.fleet.fleet import Fleet
from admitter.kube.client import Kube


def fleet_of(*clusters: str) -> Fleet:
    """A Fleet whose informer holds a WorkerCluster of each name (call it in a running loop:
    its client is made there)."""
    fleet = Fleet(Kube(client.ApiClient(client.Configuration())), "admitter-system",
                  lambda event, obj: None)
    for name in clusters:
        fleet.clusters.observe({"kind": "WorkerCluster", "metadata": {
            "name": name, "resourceVersion": "1"}, "spec": {"kubeconfig": {"name": name}}})
    return fleet
