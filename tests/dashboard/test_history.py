"""The dashboard's chart starts from the window's persisted usage, hour by hour, and hands
over to live samples where they begin."""

from __future__ import annotations

from admitter.dashboard.live import hourly_use
from admitter.dashboard.render import gpus_section
from admitter.kube.objects import format_time
from admitter.kubectl.state import QueueReading

HOUR = 3600.0
START = 1_796_000_400.0 // HOUR * HOUR


def leaf(name: str, gpu_seconds: list[float]) -> dict:
    usage = [{"start": format_time(START + i * HOUR), "gpuSeconds": seconds}
             for i, seconds in enumerate(gpu_seconds)]
    return {"metadata": {"name": name}, "spec": {}, "status": {"usage": usage}}


def test_complete_hours_before_the_first_sample_become_average_gpus() -> None:
    queues = {"a": leaf("a", [8 * HOUR, 4 * HOUR, 2 * HOUR]), "b": leaf("b", [0.0, 16 * HOUR])}
    state = QueueReading(START + 3 * HOUR, queues, {}, [])
    past = hourly_use(state, ["a", "b"], before=START + 2.5 * HOUR)
    assert past == [(START, {"a": 8.0, "b": 0.0}), (START + HOUR, {"a": 4.0, "b": 16.0})]


def test_the_chart_draws_each_sample_until_the_next_against_capacity() -> None:
    board = {"capacity": 16.0, "history": {"leaves": ["a"], "points": [
        (0.0, [8.0]), (3600.0, [16.0])]}}
    svg = gpus_section(board)
    assert 'points="0.0,100.0 720.0,100.0 720.0,0.0"' in svg
    assert "capacity 16 GPUs" in svg and "a 16" in svg and "over the last 1h" in svg
