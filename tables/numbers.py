"""Numbers as the papers print them.

A printed number carries its own precision: ``34.23`` is known to within half a
unit in the second decimal, ``72e22`` to within half of 10^22.  Every tolerance in
the audit is derived from that printed precision.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

QUALIFIERS = ("~", "<", ">", "≈")
_PRINTED = re.compile(r"^(?P<qualifier>[~<>≈]?)(?P<number>[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?)$")


@dataclass(frozen=True)
class Printed:
    """One number as printed: its text, value, last printed place and qualifier."""

    text: str
    value: float
    decimals: int
    qualifier: str = ""

    @property
    def half_unit(self) -> float:
        """Half a unit in the last printed place: the rounding a reader cannot see."""
        return 0.5 * 10.0 ** (-self.decimals)

    def format(self, value: float) -> str:
        """``value`` rounded to this number's printed precision."""
        return format_at(value, self.decimals)


def parse_printed(text: str) -> Printed:
    """Parse ``'31.80'``, ``'~0.006'``, ``'1e-5'``; raise ValueError on anything else."""
    match = _PRINTED.match(text.strip())
    if not match:
        raise ValueError(f"not a printed number: {text!r}")
    try:
        exponent = Decimal(match["number"]).as_tuple().exponent
    except InvalidOperation as error:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"not a printed number: {text!r}") from error
    return Printed(text.strip(), float(match["number"]), -int(exponent), match["qualifier"])


def format_at(value: float, decimals: int) -> str:
    """Format ``value`` with ``decimals`` places; negative decimals round to tens, hundreds, ..."""
    if decimals >= 0:
        return f"{value:.{decimals}f}"
    step = 10.0 ** (-decimals)
    return f"{round(value / step) * step:.6g}"


def format_float(value: float | None, digits: int = 4) -> str:
    """Compact display of a computed number (recomputed values, means, differences)."""
    if value is None:
        return ""
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return f"{value:.{digits}g}"
