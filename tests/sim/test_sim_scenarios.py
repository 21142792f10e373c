"""Small scenarios whose outcome is computed by hand: who starts when, who is evicted, who
waits. Cycles run every 10 s, so a change at t is acted on at the first multiple of 10 ≥ t."""

from admitter.core.decisions import EvictionReason

from builders.scenario import simulate, starts, stops, workload

GANG = """
cluster:
  topology: [rack]
  nodeGroups:
    - {count: 2, namePrefix: a-, capacity: {nvidia.com/gpu: 8}, labels: {rack: ra}}
    - {count: 2, namePrefix: b-, capacity: {nvidia.com/gpu: 8}, labels: {rack: rb}}
queues:
  - {name: team, resources: {nvidia.com/gpu: {quota: 32}}}
workloads:
  - {name: a, queue: team, pods: 2, podRequests: {nvidia.com/gpu: 8}, duration: 1h,
     minRuntime: 1h, topology: {required: rack}}
  - {name: b, queue: team, podRequests: {nvidia.com/gpu: 8}, duration: 2h, minRuntime: 2h}
  - {name: gang, queue: team, submit: 10m, pods: 2, podRequests: {nvidia.com/gpu: 8},
     duration: 1h, minRuntime: 1h, topology: {required: rack}}
  - {name: small, queue: team, submit: 11m, podRequests: {nvidia.com/gpu: 8}, duration: 30m,
     minRuntime: 30m}
"""


def test_gang_waits_for_a_whole_rack_while_a_small_job_takes_the_free_node():
    result = simulate(GANG)
    # a fills rack ra, b one node of rb. At 10 min 8 GPUs are free (b-1), but the gang needs
    # 16 in one rack; the 8-GPU job submitted later fits b-1 and starts at once.
    assert starts(result, "a") == [(0.0, {"a-0": 1, "a-1": 1})]
    assert starts(result, "b") == [(0.0, {"b-0": 1})]
    assert starts(result, "small") == [(660.0, {"b-1": 1})]
    # Rack ra frees when a finishes at 1 h: the gang starts there, having waited 50 min.
    assert starts(result, "gang") == [(3600.0, {"a-0": 1, "a-1": 1})]
    assert workload(result, "gang")["wait_s"] == 3000.0
    assert result["summary"]["preemptions"] == 0


UNFUNDED = """
cluster:
  nodeGroups: [{count: 1, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: research, resources: {nvidia.com/gpu: {quota: 8}}}
  - {name: scavenger, resources: {nvidia.com/gpu: {quota: 0}}}
workloads:
  - {name: free, queue: scavenger, podRequests: {nvidia.com/gpu: 8}, duration: 2h,
     resumable: false}
  - {name: paid, queue: research, submit: 15m, podRequests: {nvidia.com/gpu: 8}, duration: 1h,
     minRuntime: 1h}
"""


def test_unfunded_job_is_preempted_by_a_funded_one_and_loses_its_progress():
    result = simulate(UNFUNDED)
    # The idle node runs the unfunded job until the funded one arrives at 15 min.
    assert stops(result, "free") == [(900.0, EvictionReason.RECLAIMED.value, "paid")]
    assert starts(result, "paid") == [(900.0, {"n-0": 1})]
    # Not resumable: it starts over when the node frees at 1h15m and runs its full 2 h.
    assert starts(result, "free")[1][0] == 4500.0
    assert workload(result, "free")["finished_s"] == 4500.0 + 7200.0
    summary = result["summary"]
    assert summary["wasted_gpu_hours"] == 2.0  # 15 min × 8 GPUs
    assert summary["wasted_fraction"] == 0.25  # of the 8 funded GPU-hours delivered
    assert summary["unfunded_gpu_hours"] == 0.25 * 8 + 2 * 8
    assert summary["delivered_gpu_hours"] == summary["owed_gpu_hours"] == 8.0


def test_resumable_unfunded_job_keeps_its_progress():
    result = simulate(UNFUNDED.replace("resumable: false", "resumable: true"))
    assert workload(result, "free")["finished_s"] == 4500.0 + 7200.0 - 900.0
    assert result["summary"]["wasted_gpu_hours"] == 0.0


PROTECTED = """
cluster:
  nodeGroups: [{count: 2, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: t1, resources: {nvidia.com/gpu: {quota: 8}}}
  - {name: t2, resources: {nvidia.com/gpu: {quota: 8}}}
workloads:
  - {name: big, queue: t2, pods: 2, podRequests: {nvidia.com/gpu: 8}, duration: 4h,
     minRuntime: 1h}
  - {name: r, queue: t1, submit: 10m, podRequests: {nvidia.com/gpu: 8}, duration: 1h,
     minRuntime: 1h}
"""


def test_protected_job_is_reclaimed_only_when_its_min_runtime_ends():
    result = simulate(PROTECTED)
    # t2 borrows all 16 GPUs while t1 wants nothing. From 10 min t1 is owed 8 of them, but
    # big is protected until 1 h: r waits, then reclaims exactly at the protection's end.
    assert stops(result, "big") == [(3600.0, EvictionReason.RECLAIMED.value, "r")]
    assert starts(result, "r") == [(3600.0, {"n-0": 1})]
    # big (resumable, 3 h left) needs both nodes again: it restarts when r finishes.
    assert starts(result, "big")[1][0] == 7200.0
    assert workload(result, "big")["finished_s"] == 7200.0 + 3 * 3600.0
    assert result["queues"]["t2"]["preemptions"] == 1


DRAIN = """
cluster:
  nodeGroups: [{count: 2, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: team, resources: {nvidia.com/gpu: {quota: 16}}}
events:
  - {at: 30m, cordon: n-1}
workloads:
  - {name: j1, queue: team, podRequests: {nvidia.com/gpu: 4}, duration: 2h, minRuntime: 1h}
  - {name: j2, queue: team, podRequests: {nvidia.com/gpu: 4}, duration: 5h, minRuntime: 2h}
  - {name: j3, queue: team, podRequests: {nvidia.com/gpu: 4}, duration: 5h, minRuntime: 3h}
  - {name: u, queue: team, podRequests: {nvidia.com/gpu: 4}, duration: 5h}
"""


def test_cordoned_node_is_drained_at_min_runtime_boundaries():
    result = simulate(DRAIN)
    # Funded work is placed first, bin-packed: j1, j2 on n-0, j3 on n-1; then unfunded u.
    assert [starts(result, n)[0] for n in ("j1", "j2", "j3", "u")] == [
        (0.0, {"n-0": 1}), (0.0, {"n-0": 1}), (0.0, {"n-1": 1}), (0.0, {"n-1": 1})]
    # n-1 is cordoned at 30 min: unfunded u goes at once, j3 when its 3 h protection ends.
    assert stops(result, "u")[0] == (1800.0, EvictionReason.DRAINED.value, None)
    assert stops(result, "j3") == [(10800.0, EvictionReason.DRAINED.value, None)]
    # Work on n-0 is never drained, and nothing lands on n-1 again.
    assert stops(result, "j1") == stops(result, "j2") == []
    later = [nodes for w in result["workloads"] for at, nodes in starts(result, w["name"])
             if at > 1800.0]
    assert later and all(set(nodes) == {"n-0"} for nodes in later)
    # j3 restarts on n-0 at the next cycle, evicting u (unfunded) that had taken j1's place.
    assert starts(result, "j3")[1] == (10810.0, {"n-0": 1})
    assert stops(result, "u")[1] == (10810.0, EvictionReason.PREEMPTED.value, "j3")


FAIR_SHARE = """
cluster:
  nodeGroups: [{count: 2, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: a, resources: {nvidia.com/gpu: {quota: 0}}}
  - {name: b, resources: {nvidia.com/gpu: {quota: 0}}}
workloads:
  - {name: ja, queue: a, count: 16, podRequests: {nvidia.com/gpu: 1}, duration: 1h,
     minRuntime: 1h}
  - {name: jb, queue: b, count: 16, podRequests: {nvidia.com/gpu: 1}, duration: 1h,
     minRuntime: 1h}
"""


def _started_at_zero(result, queue):
    return sum(1 for w in result["workloads"] if w["queue"] == queue and w["wait_s"] == 0.0)


def test_time_based_fair_share_shifts_gpus_toward_the_team_that_used_less_last_week():
    even = simulate(FAIR_SHARE)
    assert (_started_at_zero(even, "a"), _started_at_zero(even, "b")) == (8, 8)
    # a used 1000 GPU-h of the window, b nothing: b's allocation ranks ahead and takes the
    # whole cluster first (rank, don't cap); a's jobs follow as b's finish.
    shifted = simulate(FAIR_SHARE.replace("workloads:", "history: {a: 1000}\nworkloads:"))
    assert (_started_at_zero(shifted, "a"), _started_at_zero(shifted, "b")) == (0, 16)
    # Both submitted 16 GPU-hours and were owed and delivered them all over the run: the
    # ranking changed who went first, not what each team got.
    queues = shifted["queues"]
    assert queues["a"]["owed_gpu_hours"] == queues["b"]["owed_gpu_hours"] == 16.0
    assert queues["a"]["delivered_over_owed"] == queues["b"]["delivered_over_owed"] == 1.0


OWED = """
cluster:
  nodeGroups: [{count: 2, namePrefix: n-, capacity: {nvidia.com/gpu: 8}}]
queues:
  - {name: a, resources: {nvidia.com/gpu: {quota: 8}}}
  - {name: b, resources: {nvidia.com/gpu: {quota: 8}}}
settings: {fairShare: {window: 0}}
workloads:
  - {name: ja, queue: a, count: 2, podRequests: {nvidia.com/gpu: 8}, duration: 1h, minRuntime: 1h}
  - {name: jb, queue: b, submit: 30m, podRequests: {nvidia.com/gpu: 8}, duration: 1h,
     minRuntime: 1h}
"""


def test_owed_is_what_each_team_submitted_when_the_run_has_room_for_it():
    result = simulate(OWED)
    queues = result["queues"]
    # The run ends at 2 h: 32 GPU-hours, 16 : 16 by weight. b submitted 8 (one job of 8 GPUs
    # for 1 h), so a is owed the 16 it submitted, b its 8: the run had room for both.
    assert queues["a"]["owed_gpu_hours"] == queues["a"]["delivered_gpu_hours"] == 16.0
    # b waits from 30 min until a's jobs end at 1 h, and then gets all it is owed.
    assert starts(result, "jb") == [(3600.0, {"n-0": 1})]
    assert queues["b"]["owed_gpu_hours"] == queues["b"]["delivered_gpu_hours"] == 8.0
    assert result["summary"]["owed_delivered_ratio"] == 1.0
    assert result["summary"]["occupancy"] == round((16 + 8) / (16 * 2), 6)
