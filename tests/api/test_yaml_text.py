"""The YAML writer for what Go readers (kubectl, helm, the API server) read back: every string
comes back a string, also those PyYAML's own writer leaves bare and a YAML 1.1 reader takes for
a number or a boolean."""

from __future__ import annotations

import re

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from admitter.api import yaml_text

# The scalars Go's YAML 1.1 reader resolves to something other than a string.
GO_NON_STRINGS = ["1e5", "1E5", "-1e3", "1.5e+3", "1.5e3", ".5", "1_000", "0o17", "0x1F", "y",
                  "N", "yes", "off", "true", "null", "~", "123456", "012"]


@pytest.mark.parametrize("value", GO_NON_STRINGS)
def test_a_string_a_go_reader_would_take_for_another_type_is_quoted(value: str) -> None:
    text = yaml_text.dump({"label": value})
    assert text in (f"label: '{value}'\n", f'label: "{value}"\n')
    assert yaml.safe_load(text) == {"label": value}


@pytest.mark.parametrize("value", ["enforced", "t1e5", "v1.2", "10.0.0.1", "e5", "1.2.3"])
def test_an_ordinary_string_stays_bare(value: str) -> None:
    assert yaml_text.dump({"label": value}) == f"label: {value}\n"


@given(st.lists(st.dictionaries(st.text(max_size=8), st.one_of(
    st.text(max_size=12), st.integers(), st.booleans(), st.none(),
    st.from_regex(re.compile(r"[-+]?[0-9]{1,3}(\.[0-9]{0,2})?([eE][-+]?[0-9]{1,3})?"),
                  fullmatch=True))), max_size=3))
def test_documents_read_back_exactly_as_written(documents: list[dict[str, object]]) -> None:
    assert list(yaml.safe_load_all(yaml_text.dump_all(documents))) == documents
