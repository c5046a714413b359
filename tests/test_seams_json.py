"""experiment.seams' JSON narrowing: a value decoded from another process is read as the
kind the reader needs, or a ValueError names the value (no TypeError from deep inside)."""

from __future__ import annotations

import pytest

from experiment.seams import JsonValue, json_float, json_int, json_list, json_object


def test_numbers_read_as_int_and_float() -> None:
    assert json_int(3) == 3 and json_int(3.9) == 3 and json_int("12") == 12
    assert json_int(True) == 1
    assert json_float(2) == 2.0 and json_float("0.5") == 0.5


@pytest.mark.parametrize("value", [None, [1], {"a": 1}])
def test_a_non_number_is_named(value: JsonValue) -> None:
    with pytest.raises(ValueError, match="expected a number"):
        json_int(value)
    with pytest.raises(ValueError, match="expected a number"):
        json_float(value)


def test_objects_and_arrays() -> None:
    assert json_object({"a": [1]}) == {"a": [1]}
    assert json_object(None) == {} and json_list(None) == []
    assert json_list([1, "x"]) == [1, "x"]
    with pytest.raises(ValueError, match=r"expected a JSON object, not \[1\]"):
        json_object([1])
    with pytest.raises(ValueError, match="expected a JSON array, not 'x'"):
        json_list("x")
