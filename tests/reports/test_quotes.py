"""The numbers the docs quote from the embedded run, checked against the cells they round (reports/quotes.py)."""
from pathlib import Path

import pytest

from reports.__main__ import main as reports_main
from reports.quotes import (_occurs, _rounds_to, cell_numbers, check, grids_from_findings, grids_from_tables,
                            load_quotes, quoted_numbers)

ROOT = Path(__file__).resolve().parents[2]
GRID = """# Embedded thing

*caption*

## Reproduced (mean ± std over seeds, n)

|  | test PPL | recon |
|---|---|---|
| DLCM · R 4 | {ppl} | 0.8267 (n=1) |
| token · a \\| b | 8.9463 ± 0.1357 (n=3) | not measured by this profile's runs |
"""
REGISTRY = """docs/page.md:
  - {quote: "test PPL of 9.06 ± 0.09", cell: [embedded/thing.md, "DLCM · R 4", test PPL]}
  - {quote: "reconstructs 82.7 %", cell: [embedded/thing.md, "DLCM · R 4", recon], scale: 100}
  - {quote: "baseline 8.95", cell: [embedded/thing.md, "token · a | b", test PPL]}
"""
PAGE = "DLCM reaches a test PPL of 9.06 ± 0.09 and reconstructs 82.7 % of the tokens; the baseline 8.95.\n"


def _layout(tmp_path: Path, ppl: str, page: str = PAGE) -> tuple[Path, Path]:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "page.md").write_text(page)
    (tmp_path / "docs" / "quotes.yaml").write_text(REGISTRY)
    (tmp_path / "tables" / "embedded").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tables" / "embedded" / "thing.md").write_text(GRID.format(ppl=ppl))
    return tmp_path / "docs" / "quotes.yaml", tmp_path / "tables"


def test_the_docs_quotes_agree_with_the_committed_findings_page():
    quotes = load_quotes(ROOT / "docs" / "quotes.yaml")
    problems, checked, absent = check(quotes, grids_from_findings(ROOT / "docs" / "findings.md"), ROOT, complete=False)
    assert problems == []
    assert checked >= 55  # the page leaves out some tables and columns (levels, recall): make findings checks those
    assert {q.table for q in absent} <= {"levels.md", "embedded/dlcm.md"}


def test_the_quoted_number_is_the_last_number_or_the_last_pair():
    assert quoted_numbers("at R 2 8.91") == ("8.91",)
    assert quoted_numbers("(R 4: 4.07 ± 0.05") == ("4.07", "0.05")
    assert quoted_numbers("samples at Gen. PPL 31,318") == ("31,318",)
    with pytest.raises(ValueError, match="no number"):
        quoted_numbers("no digits here")


def test_quotes_that_round_their_cells_pass_and_a_moved_cell_is_named_with_its_new_value(tmp_path):
    registry, tables = _layout(tmp_path, "9.0583 ± 0.0929 (n=3)")
    quotes = load_quotes(registry)
    problems, checked, absent = check(quotes, grids_from_tables(tables, {"embedded/thing.md"}), tmp_path)
    assert (problems, checked, absent) == ([], 3, [])
    _layout(tmp_path, "9.1049 ± 0.0929 (n=3)")
    problems, _, _ = check(quotes, grids_from_tables(tables, {"embedded/thing.md"}), tmp_path)
    assert problems == ["docs/page.md: 'test PPL of 9.06 ± 0.09' quotes embedded/thing.md [DLCM · R 4 | test PPL], "
                        "which is now '9.1049 ± 0.0929 (n=3)': update the doc and the registry"]


def test_a_quote_gone_from_its_doc_and_a_cell_the_source_lacks_are_told_apart(tmp_path):
    registry, tables = _layout(tmp_path, "9.0583 ± 0.0929 (n=3)", PAGE.replace("82.7 %", "83 %"))
    problems, checked, absent = check(load_quotes(registry), {}, tmp_path, complete=False)
    assert problems == ["docs/page.md: the quote 'reconstructs 82.7 %' is no longer in the doc; "
                        "update docs/quotes.yaml"]
    assert checked == 0 and len(absent) == 2  # a page without the table: not shown there, not stale


def test_a_cell_the_registry_misnames_is_an_error_where_the_source_shows_that_table(tmp_path):
    registry, tables = _layout(tmp_path, "9.0583 ± 0.0929 (n=3)")
    registry.write_text(REGISTRY.replace('"DLCM · R 4", test PPL', '"DLCM · R4", test PPL')
                        .replace("recon], scale", "reconstruction], scale"))
    grids = grids_from_tables(tables, {"embedded/thing.md"})
    problems, checked, _ = check(load_quotes(registry), grids, tmp_path)
    fix = "; correct its cell in docs/quotes.yaml, or rebuild the tables if they are another run's (make reproduce)"
    assert problems == ["docs/page.md: 'test PPL of 9.06 ± 0.09': no row 'DLCM · R4' in embedded/thing.md" + fix,
                        "docs/page.md: 'reconstructs 82.7 %': no column 'reconstruction' in embedded/thing.md" + fix]
    assert checked == 1
    problems, _, absent = check(load_quotes(registry), grids, tmp_path, complete=False)  # a page may leave columns out
    assert len(problems) == 1 and "no row 'DLCM · R4'" in problems[0]
    assert [q.column for q in absent] == ["reconstruction"]


def test_the_cli_exits_1_naming_a_stale_quote_and_2_on_a_bad_registry(tmp_path, monkeypatch, capsys):
    registry, tables = _layout(tmp_path, "9.2 ± 0.1 (n=3)")
    monkeypatch.chdir(tmp_path)
    assert reports_main(["quotes", "--tables", str(tables), "--quotes", str(registry)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("docs/page.md: 'test PPL of 9.06 ± 0.09' quotes") and "'9.2 ± 0.1 (n=3)'" in out[0]
    assert out[-1] == f"quotes: 3 of 3 checked against {tables}, 1 stale or missing"
    registry.write_text("docs/page.md:\n  - {quote: x}\n")
    assert reports_main(["quotes", "--tables", str(tables), "--quotes", str(registry)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "each entry is {quote: ..., cell: [table, row, column]}" in err[0]
    assert reports_main(["quotes", "--tables", str(tmp_path / "nowhere"), "--quotes", str(registry)]) == 2
    assert "no such file or folder (the tables folder)" in capsys.readouterr().err
    registry.write_text(REGISTRY + REGISTRY)  # a doc named twice would drop its first block silently
    assert reports_main(["quotes", "--tables", str(tables), "--quotes", str(registry)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "key 'docs/page.md' appears twice" in err[0]


def test_numbers_are_read_whole_and_rounded_half_up():
    assert quoted_numbers("GPT-2 s at 1e-4") == ("1e-4",) and quoted_numbers("a loss of -0.17") == ("-0.17",)
    assert cell_numbers("6.4092 (n=1)") == ("6.4092",)  # n is no standard deviation
    assert cell_numbers("0.0012 ± 5.039e-05 (n=3)") == ("0.0012", "5.039e-05")
    assert _rounds_to("0.046", "0.0455", 1) and _rounds_to("0.545", "0.5445", 1)  # half-up, as printed
    assert _rounds_to("82.7", "0.8267", 100) and not _rounds_to("8.90", "8.9094", 1)
    assert not _occurs("at R 2 8.91", "at R 2 8.912 nats") and _occurs("at R 2 8.91", "at R 2 8.91.")
