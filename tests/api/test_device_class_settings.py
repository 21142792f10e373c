"""`deviceClassMappings`: which DeviceClasses count as which quota resource; bad input is
refused naming the field and the value."""

import pytest
from pydantic import ValidationError

from admitter.api.settings import Settings


def settings(*mappings):
    return Settings.model_validate({"deviceClassMappings": list(mappings)})


def test_each_class_maps_to_its_resource():
    found = settings({"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
                     {"name": "nvidia.com/mig-1g.10gb",
                      "deviceClassNames": ["mig-1g.nvidia.com", "mig-small.example.com"]})
    assert found.device_classes() == {"gpu.nvidia.com": "nvidia.com/gpu",
                                      "mig-1g.nvidia.com": "nvidia.com/mig-1g.10gb",
                                      "mig-small.example.com": "nvidia.com/mig-1g.10gb"}


def test_none_by_default():
    assert Settings().device_classes() == {}


@pytest.mark.parametrize(("mapping", "field", "value"), [
    ({"name": "nvidia.com/gpu", "deviceClassNames": ["GPU.nvidia.com"]},
     "deviceClassMappings.0.deviceClassNames.0", "'GPU.nvidia.com'"),
    ({"name": "nvidia gpu", "deviceClassNames": ["gpu.nvidia.com"]},
     "deviceClassMappings.0.name", "'nvidia gpu'"),
    ({"name": "nvidia.com/gpu", "deviceClassNames": []},
     "deviceClassMappings.0.deviceClassNames", "at least 1 item"),
    ({"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"], "driver": "x"},
     "deviceClassMappings.0.driver", "'x'"),
])
def test_bad_input_is_refused_naming_the_field_and_the_value(mapping, field, value):
    with pytest.raises(ValidationError) as refused:
        settings(mapping)
    text = str(refused.value)
    assert field in text and value in text, text


def test_a_class_mapped_twice_is_refused_naming_both_resources():
    with pytest.raises(ValidationError, match=(
            r"DeviceClass 'gpu.nvidia.com' is mapped twice \('nvidia.com/gpu' and "
            r"'example.com/gpu'\)")):
        settings({"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
                 {"name": "example.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]})
