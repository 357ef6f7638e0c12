"""Power-law fits and iso-PPL ratios (reports/scaling.py) on constructed data, edge cases included."""
import pytest

from reports.scaling import fit, iso_ratio

XS = [1e5, 1e6, 1e7]
BASE = [(x, 100 * x ** -0.2) for x in XS]


def test_fit_recovers_power_law_and_drops_unloggable_points():
    law = fit([(0.0, 9.0)] + BASE)
    assert law.b == pytest.approx(-0.2) and law(1e6) == pytest.approx(100 * 1e6 ** -0.2)
    assert fit([(0.0, 9.0), (10.0, 5.0)]) is None


def test_iso_ratio_exact_and_extrapolated():
    reading = iso_ratio(BASE, [(x, 80 * x ** -0.2) for x in XS])
    assert reading.target == pytest.approx(BASE[-1][1]) and reading.x_base == 1e7
    assert reading.ratio == pytest.approx(0.8 ** 5) and not reading.extrapolated  # 80 x^-0.2 = 100 (1e7)^-0.2
    assert iso_ratio(BASE, [(x, 80 * x ** -0.2) for x in XS[:2]]).extrapolated


@pytest.mark.parametrize("baseline, candidate, reason", [
    (BASE, [(1e6, 5.0)], "fewer than 2 points"),
    (BASE, [(1e5, 5.0), (1e6, 6.0)], "PPL does not fall with x"),
    ([], BASE, "no baseline point"),
])
def test_no_ratio_says_why(baseline, candidate, reason):
    reading = iso_ratio(baseline, candidate, "ConceptLM")
    assert reading.ratio is None and reason in reading.reason
