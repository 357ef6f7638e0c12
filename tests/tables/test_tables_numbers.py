"""Printed numbers: value, last printed place, qualifier."""
import pytest

from tables.numbers import format_at, format_float, parse_printed


@pytest.mark.parametrize("text, value, decimals, qualifier", [
    ("34.23", 34.23, 2, ""), ("31.80", 31.8, 2, ""), ("128", 128.0, 0, ""), ("-0.30", -0.3, 2, ""),
    ("~0.006", 0.006, 3, "~"), ("<2", 2.0, 0, "<"), (">0.98", 0.98, 2, ">"), ("1e-5", 1e-5, 5, ""),
    ("72e22", 7.2e23, -22, ""), ("+2.1", 2.1, 1, ""),
])
def test_parse_printed(text, value, decimals, qualifier):
    printed = parse_printed(text)
    assert printed.value == pytest.approx(value)
    assert (printed.decimals, printed.qualifier) == (decimals, qualifier)


def test_half_unit_follows_the_last_printed_place():
    assert parse_printed("34.23").half_unit == pytest.approx(0.005)
    assert parse_printed("40.3").half_unit == pytest.approx(0.05)
    assert parse_printed("72e22").half_unit == pytest.approx(5e21)


@pytest.mark.parametrize("text", ["8B", "1,536", "n/a", "", "1.2.3", "~"])
def test_non_numbers_are_rejected(text):
    with pytest.raises(ValueError):
        parse_printed(text)


def test_formatting():
    assert format_at(34.3175, 2) == "34.32"
    assert format_at(1234.0, -2) == "1200"
    assert format_float(34.3175) == "34.3175"
    assert format_float(2.0) == "2"
    assert format_float(None) == ""
