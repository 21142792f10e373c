"""The Job-facing contract: the label and annotations a researcher puts on a `batch/v1` Job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from admitter.api.duration import format_duration, parse_duration

QUEUE_LABEL = "admitter.dev/queue-name"
MIN_RUNTIME_ANNOTATION = "admitter.dev/min-runtime"
MAX_RUNTIME_ANNOTATION = "admitter.dev/max-runtime"
"""How long the job may run in all, its admissions added up; then it is stopped for good."""
RESUMABLE_ANNOTATION = "admitter.dev/resumable"
TOPOLOGY_REQUIRED_ANNOTATION = "admitter.dev/topology-required"
TOPOLOGY_PREFERRED_ANNOTATION = "admitter.dev/topology-preferred"
ADMITTED_WORKLOAD_ANNOTATION = "admitter.dev/admitted-workload"
"""Set by the controller on a Job it admitted (value: the Workload's name); users may not."""
ORIGINAL_AFFINITY_ANNOTATION = "admitter.dev/original-affinity"
"""The pod template's own affinity (JSON), restored when the Job is suspended again."""
VOIDED_ADMISSION_ANNOTATION = "admitter.dev/voided-admission"
"""Set by the controller on a Workload whose admission's outcome it never learnt (value: when
it gave up on it): the change makes that write, if it arrives late, conflict."""


class ContractError(ValueError):
    """A bad label or annotation; the message names the key, the value and the fix."""


@dataclass(frozen=True, slots=True)
class JobContract:
    """What a Job declared through its annotations (and its pod templates', for
    `pod_set_topology`: (required, preferred) per pod set, empty when none asks)."""

    min_runtime: float
    resumable: bool
    topology_required: str | None
    topology_preferred: str | None
    pod_set_topology: tuple[tuple[str | None, str | None], ...] = ()
    max_runtime: float | None = None


def parse_contract(
    annotations: Mapping[str, str],
    *,
    max_min_runtime: float,
    topology_levels: list[str] | None,
    max_runtime_ceiling: float | None = None,
) -> JobContract:
    """Read and check the contract annotations.

    `topology_levels` is the cluster's Topology (coarsest first), or None when none exists.
    A missing min runtime means unfunded (0): nothing is charged unless asked for. A missing
    max runtime means none; `max_runtime_ceiling` (the queue's) bounds a declared one.
    """
    raw_min = annotations.get(MIN_RUNTIME_ANNOTATION, "0")
    try:
        min_runtime = parse_duration(raw_min)
    except ValueError as exc:
        raise ContractError(f"annotation {MIN_RUNTIME_ANNOTATION}: {exc}") from None
    if min_runtime > max_min_runtime:
        raise ContractError(
            f"annotation {MIN_RUNTIME_ANNOTATION}={raw_min!r} is above the queue's "
            f"maxMinRuntime {format_duration(max_min_runtime)}; ask for at most that"
        )
    raw_resumable = annotations.get(RESUMABLE_ANNOTATION, "true")
    if raw_resumable not in ("true", "false"):
        raise ContractError(
            f"annotation {RESUMABLE_ANNOTATION}={raw_resumable!r} must be 'true' or 'false'"
        )
    required, preferred = parse_topology(annotations, topology_levels)
    max_runtime = parse_max_runtime(annotations, min_runtime, max_runtime_ceiling)
    return JobContract(min_runtime, raw_resumable == "true", required, preferred,
                       max_runtime=max_runtime)


def parse_max_runtime(annotations: Mapping[str, str], min_runtime: float,
                      ceiling: float | None) -> float | None:
    """The declared maximum run time, checked by `max_runtime_problem`; None when absent."""
    raw = annotations.get(MAX_RUNTIME_ANNOTATION)
    if raw is None:
        return None
    try:
        max_runtime = parse_duration(raw)
    except ValueError as exc:
        raise ContractError(f"annotation {MAX_RUNTIME_ANNOTATION}: {exc}") from None
    problem = max_runtime_problem(max_runtime, min_runtime, ceiling)
    if problem is not None:
        raise ContractError(f"annotation {MAX_RUNTIME_ANNOTATION}={raw!r} {problem}")
    return max_runtime


def max_runtime_problem(max_runtime: float, min_runtime: float,
                        ceiling: float | None) -> str | None:
    """What is wrong with a maximum run time, wherever it is declared (a Job's annotation, a
    Workload, a scenario): it must be above 0, not below the min runtime (the job would be
    stopped inside its own protection), and not above the queue's ceiling."""
    if max_runtime <= 0:
        return "must be above 0; leave it out for no maximum"
    if max_runtime < min_runtime:
        return (f"is below the min runtime {format_duration(min_runtime)}: the job would be "
                "stopped inside its protected min runtime; raise the maximum or lower the "
                "minimum")
    if ceiling is not None and max_runtime > ceiling:
        return (f"is above the queue's maxRuntimeCeiling {format_duration(ceiling)}; ask for "
                "at most that")
    return None


def parse_topology(annotations: Mapping[str, str],
                   topology_levels: list[str] | None) -> tuple[str | None, str | None]:
    """The (required, preferred) topology levels the annotations name, checked against the
    cluster's Topology (coarsest first; None when none exists). The same rule reads a job's
    own annotations and a pod template's (that pod set's own request)."""
    required = annotations.get(TOPOLOGY_REQUIRED_ANNOTATION) or None
    preferred = annotations.get(TOPOLOGY_PREFERRED_ANNOTATION) or None
    for key, level in ((TOPOLOGY_REQUIRED_ANNOTATION, required),
                       (TOPOLOGY_PREFERRED_ANNOTATION, preferred)):
        if level is None:
            continue
        if topology_levels is None:
            raise ContractError(f"annotation {key}={level!r}: the cluster defines no Topology")
        if level not in topology_levels:
            raise ContractError(
                f"annotation {key}={level!r} is not a topology level; use one of "
                + ", ".join(topology_levels)
            )
    if (
        required is not None
        and preferred is not None
        and topology_levels is not None
        and topology_levels.index(preferred) < topology_levels.index(required)
    ):
        raise ContractError(
            f"annotation {TOPOLOGY_PREFERRED_ANNOTATION}={preferred!r} is coarser than "
            f"{TOPOLOGY_REQUIRED_ANNOTATION}={required!r}; the preferred level must be the "
            "same or finer"
        )
    return required, preferred
