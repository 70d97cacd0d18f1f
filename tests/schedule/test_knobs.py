"""Schedule knobs: defaults outside a config, recorded spaces and applied values inside one."""

import pytest

from plait.schedule import knobs
from plait.schedule.errors import ScheduleError


def test_choose_outside_a_config_returns_the_default_and_records_nothing():
    assert knobs.choose("s.tile", (4, 8, 16), default=8) == 8
    with knobs.using() as space:
        pass
    assert space.knobs == {}


def test_using_records_the_space_and_applies_the_config():
    with knobs.using({"s.tile": 16}) as space:
        assert knobs.choose("s.tile", (4, 8, 16), default=8) == 16
        assert knobs.choose("s.unroll", [1, 2], default=1) == 1
    assert list(space.knobs) == ["s.tile", "s.unroll"]
    assert space.knobs["s.tile"].choices == (4, 8, 16)
    assert space.chosen() == {"s.tile": 16, "s.unroll": 1}
    assert knobs.choose("s.tile", (4, 8, 16), default=8) == 8  # the context is gone


def test_nested_contexts_record_separately():
    with knobs.using({"a": 2}) as outer:
        with knobs.using({}) as inner:
            assert knobs.choose("a", (1, 2), default=1) == 1
        assert knobs.choose("a", (1, 2), default=1) == 2
    assert list(inner.knobs) == ["a"] and list(outer.knobs) == ["a"]


def test_bad_values_are_clear_errors():
    with pytest.raises(ScheduleError, match=r"^knob 'k': default 3 is not one of its choices \[1, 2\]$"):
        knobs.choose("k", (1, 2), default=3)
    with knobs.using({"k": 5}):
        with pytest.raises(ScheduleError, match=r"^knob 'k': the config's value 5 is not one of \[1, 2\]$"):
            knobs.choose("k", (1, 2), default=1)
    with knobs.using({}):
        knobs.choose("k", (1, 2), default=1)
        with pytest.raises(ScheduleError, match=r"^knob 'k' declared twice with different choices: \[1, 2\] and \[1, 4\]$"):
            knobs.choose("k", (1, 4), default=1)
