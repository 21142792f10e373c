"""Settings reach the cycle through one conversion, for the controller and the simulator alike."""

from dataclasses import fields

from admitter.api.convert import core_cycle_settings
from admitter.api.settings import Settings
from admitter.core.decisions import CycleSettings
from admitter.core.model import FairShareSettings
from admitter.core.policy import ShortJobs, TimeSlicing


def test_settings_left_out_are_the_cycles_own_defaults():
    assert core_cycle_settings(Settings()) == CycleSettings()


def test_every_knob_of_the_cycle_is_carried_over():
    settings = Settings.model_validate({
        "fairShare": {"window": "2d", "halfLife": "12h", "kValue": 0.5},
        "starvationBound": "5m", "podsReadyTimeout": "90s", "nonPreemptiblePriority": 1000,
        "shortJobs": {"maxMinRuntime": "30m", "maxGpus": 2, "leastRoomFraction": 0.05},
        "timeSlicing": {"swapMargin": 0.1, "nonResumableGap": 4}})
    converted = core_cycle_settings(settings)
    assert converted == CycleSettings(fair_share=FairShareSettings(2 * 86400.0, 43200.0, 0.5),
                                      starvation_bound=300.0, pods_ready_timeout=90.0,
                                      non_preemptible_priority=1000,
                                      short_jobs=ShortJobs(1800.0, 2, 0.05),
                                      time_slicing=TimeSlicing(0.1, 4.0))
    # A knob added to the cycle but not to the conversion (nor above) keeps its default: caught.
    # `reasons` is no setting: the caller says whether it reads them (the controller does).
    assert converted.reasons
    assert all(getattr(converted, f.name) != getattr(CycleSettings(), f.name)
               for f in fields(CycleSettings) if f.name != "reasons")
