"""The NCM generator's code NLL per window against the AR baseline's (embedded/ncm_elbo): no sampling needed."""
import pytest

from reports.build import _in_words
from tables.build import build
from tests.tables.test_tables_verdicts import write_results


def test_the_ratio_of_the_code_nll_to_the_ar_nll_per_window(tmp_path):
    runs = tmp_path / "runs"
    write_results(runs, "ncm_s", "mechanisms", [{"mech/gen_code_nll_window": 2000.0, "mech/intact_nll": 5.0}])
    write_results(runs, "ar_gpt2_ncm_s", "ppl", [{"test/nll": 2.5}])
    view = next(v for v in build(runs).tables if (v.spec.paper, v.spec.table) == ("embedded", "ncm_elbo"))
    assert view.cells["ar", "nll"].reproduced.mean == pytest.approx(320.0)
    assert view.cells["ratio", "nll"].reproduced.mean == pytest.approx(2000.0 / 320.0)


def test_the_report_states_an_audit_finding_in_words_with_the_formula_folded_away():
    assert _in_words("formula: `mean(a, b)`; probably 34.32 with two digits swapped") == \
        "Probably 34.32 with two digits swapped (formula: audit.md)."
    assert _in_words("formula: `cell('t', 'r', 'c') - 1`") == \
        "Recomputed with the paper's own formula (formula: audit.md)."
