"""Scenario workload templates expanded into the instances the simulator submits."""

from __future__ import annotations

import random
from dataclasses import dataclass

from admitter.api.convert import core_resources
from admitter.api.scenario import Scenario, WorkloadTemplate
from admitter.core.model import GPU, PodSet, TopologyRequest, Workload

POD_SET = "main"
"""A scenario workload is a plain Job: one pod set, named as the controller names it."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One submitted workload; `order` is its rank in the file (templates, then instances)."""

    key: str
    order: int
    workload_class: str
    duration: float
    pending: Workload
    """The workload as the core sees it while it waits (fresh or requeued)."""

    @property
    def queue(self) -> str:
        return self.pending.queue

    @property
    def submitted_at(self) -> float:
        return self.pending.submitted_at

    @property
    def pod_set(self) -> PodSet:
        return self.pending.pod_sets[0]

    @property
    def gpus(self) -> int:
        """GPUs of the whole gang: what it holds while running."""
        return self.pod_set.requests.get(GPU, 0) * self.pod_set.count


def instance_names(template: WorkloadTemplate) -> list[str]:
    """`name` alone, or name-0, name-1, … when the template stands for several workloads."""
    if template.count == 1:
        return [template.name]
    return [f"{template.name}-{i}" for i in range(template.count)]


def expand(scenario: Scenario, seed: int) -> list[Instance]:
    """Every instance in submission order; simultaneous submissions in a seeded random order.

    The seed only permutes ties: the core orders work by its own keys, so no result may depend
    on it (a property the tests check).
    """
    instances: list[Instance] = []
    for template in scenario.workloads:
        requests = core_resources(template.pod_requests)
        topology = TopologyRequest()
        if template.topology is not None:
            topology = TopologyRequest(template.topology.required, template.topology.preferred)
        pod_set = PodSet(POD_SET, template.pods, requests)
        for i, name in enumerate(instance_names(template)):
            workload = Workload(
                key=name,
                queue=template.queue,
                pod_sets=(pod_set,),
                submitted_at=template.submit + i * template.every,
                priority=template.priority,
                min_runtime=template.min_runtime,
                max_runtime=template.max_runtime,
                resumable=template.resumable,
                topology=topology,
            )
            instances.append(Instance(
                name, len(instances), template.workload_class, template.duration, workload))
    tie_break = random.Random(seed)
    ranks = {instance.key: tie_break.random() for instance in instances}
    instances.sort(key=lambda instance: (instance.submitted_at, ranks[instance.key]))
    return instances
