"""Property-based fuzzing of the parsers: arbitrary text and mangled real outputs never crash."""

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from portal.benchmarks.parsers import PARSERS, parse  # noqa: E402
from tests.benchmarks.test_parsers import ALL_FIXTURES, check_contract  # noqa: E402

TOOLS = sorted(PARSERS)
# Small real fixtures keep each example fast; the large MLPerf logs are covered by truncation tests.
SOURCES = [(p.parent.name, p.read_text()) for p in ALL_FIXTURES if p.stat().st_size < 40_000]


@settings(max_examples=300, deadline=None)
@given(tool=st.sampled_from(TOOLS), text=st.text())
def test_arbitrary_text(tool, text):
    check_contract(parse(tool, text))


@settings(max_examples=300, deadline=None)
@given(source=st.sampled_from(SOURCES), data=st.data())
def test_mangled_real_output(source, data):
    tool, text = source
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    junk = data.draw(
        st.text(alphabet=st.characters(), max_size=40) | st.sampled_from(["9" * 500, "1e999", "nan"])
    )
    check_contract(parse(tool, text[:start] + junk + text[end:]))
