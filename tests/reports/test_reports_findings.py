"""Findings generated from the built tables: known verdicts, proxies apart, every number traceable to its table."""
import json
import re

import pytest

from reports.__main__ import main as reports_main
from reports.findings import END, START, collect, findings_markdown, rewrite_block, untraceable
from tables.__main__ import main as tables_main

from tests.tables.test_tables_verdicts import CASE, PROVENANCE, SPEC as ROWS_AND_COLUMNS  # the known-answer case

PAPER = ("paper: hand\ntitle: Hand-made paper\narxiv: 2601.00002v1\nurl: https://arxiv.org/abs/2601.00002v1\n"
         "sources: {pdf: the PDF}\n")
SPEC = 'paper: hand\ntable: t1\ntitle: "Hand Table 1: perplexity"\nwhere: Table 1\n' + ROWS_AND_COLUMNS
HEADER = "table,row,column,value,decimals,metric,unit,direction,source,note"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("findings")
    (root / "specs" / "hand").mkdir(parents=True)
    (root / "reported" / "hand").mkdir(parents=True)
    (root / "specs" / "hand" / "t1.yaml").write_text(SPEC)
    (root / "reported" / "hand" / "paper.yaml").write_text(PAPER)
    lines = [f"t1,{row},{column},{value},1,perplexity,PPL,lower,pdf,"
             for row, (ppl, avg, _) in CASE.items() for column, value in (("ppl", ppl), ("avg", avg))]
    (root / "reported" / "hand" / "t1.csv").write_text("\n".join([HEADER, *lines]) + "\n")
    for experiment, (_, _, seeds) in CASE.items():
        for seed, value in enumerate(seeds):
            path = root / "runs" / experiment / f"seed{seed}" / "eval" / "ppl.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({"schema_version": 1, "experiment": experiment, "seed": seed, "eval": "ppl",
                                        "metrics": {"test/ppl": value}, "provenance": {**PROVENANCE, "seed": seed}}))
    assert tables_main(["build", "--results", str(root / "runs"), "--out", str(root / "tables"),
                        "--specs", str(root / "specs"), "--reported", str(root / "reported")]) == 0
    return root


def test_one_bullet_per_judged_group_with_the_known_verdicts(built):
    findings = collect(built / "tables")
    assert [finding.text for finding in findings.judged] == [
        "Hand Table 1 · Train PPL · S: agrees 2 / differs 1 / inconclusive 0 / not exercised 0. "
        "Agrees: Base − ConceptLM (paper 2.0; ours 2 [1.5845, 2.4155]; n 3, 3); PM − ConceptLM (paper 1.0; ours 4 "
        "[3.7733, 4.2267]; n 3, 3). Differs: Base − PM (paper 1.0; ours -2 [-2.4155, -1.5845]; n 3, 3).",
        "Hand Table 1 · Train PPL · XS: agrees 0 / differs 0 / inconclusive 1 / not exercised 0. "
        "Inconclusive: Base − ConceptLM (paper 1.0; ours 0.1 [-0.8068, 1.0068]; n 3, 3; p=0.77; could see |d| ≥ 1.81).",
        "Hand Table 1 · Train PPL · M: agrees 0 / differs 0 / inconclusive 1 / not exercised 0. "
        "Inconclusive: Base − ConceptLM (paper 1.0; ours 1; n 1, 3; n=1: Base).",
    ]
    assert ("agrees 2 / differs 1 / inconclusive 2 / not exercised 0;" in findings.lead
            and "5 proxy pairs" in findings.lead)


def test_proxies_are_listed_apart_and_never_counted(built):
    findings = collect(built / "tables")
    assert len(findings.proxies) == 3 and all(finding.proxy for finding in findings.proxies)
    assert all(" (ours, a proxy) · " in finding.text and ": proxy: agrees " in finding.text
               for finding in findings.proxies)
    assert not any("proxy" in finding.text for finding in findings.judged)
    assert findings.proxies[0].text.startswith("Hand Table 1 · Avg PPL (paper) against Train PPL (ours, a proxy) · S: "
                                               "proxy: agrees 2 / differs 1 / inconclusive 0 / not exercised 0. Proxy, "
                                               "same order: Base − ConceptLM (paper 5.0; ours 2 "
                                               "[1.5845, 2.4155]; n 3, 3)")
    text = findings_markdown(findings, built / "tables")
    judged, proxies = text.split("Proxy comparisons:")
    assert "Avg PPL" not in judged and proxies.count("\n- ") == 3
    assert "neither agreement nor disagreement" in proxies.splitlines()[0]


def test_every_number_of_a_finding_is_in_its_table(built):
    findings = collect(built / "tables")
    for finding in findings.judged + findings.proxies:
        assert untraceable(finding.text, (built / "tables" / finding.source).read_text()) == [], finding.text
    index = (built / "tables" / "index.json").read_text()
    assert untraceable(findings.lead, index) == []


def test_a_number_not_in_the_table_is_caught(built):
    finding = collect(built / "tables").judged[0]
    table = (built / "tables" / finding.source).read_text()
    assert "1.5845" in finding.text
    assert untraceable(finding.text.replace("1.5845", "1.5846", 1), table) == ["1.5846"]
    assert untraceable(finding.text.replace("ours -2 [", "ours -2.5 ["), table) == ["-2.5"]


def test_the_report_opens_with_the_known_verdicts(built):
    """The summary of the known-answer case, before its table: one line per group, the reason of every
    inconclusive pair, proxies marked and never counted as agreement."""
    assert reports_main(["build", "--results", str(built / "runs"), "--tables", str(built / "tables"),
                         "--out", str(built / "report")]) == 0
    text = (built / "report" / "report.md").read_text()
    summary = text[text.index("## What this profile reproduces"):text.index("### Hand Table 1")]
    assert "| Table 1 · Train PPL · S | mixed | 2 agree, 1 differs | [table](#hand-t1) |" in summary
    assert "| Table 1 · Train PPL · XS | inconclusive | 1 inconclusive (1 within the noise) |" in summary
    assert "| Table 1 · Train PPL · M | inconclusive | 1 inconclusive (1 n=1) |" in summary
    assert "| proxy: mixed | 2 same order, 1 opposite order |" in summary
    assert "6 comparisons: 1 mixed, 2 inconclusive, 3 proxies (neither agreement nor disagreement)" in summary


def test_cli_prints_and_rewrites_the_readme_block(built, capsys, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\nWhat the runs say:\n\n{START}\nold text\n{END}\n\nAfter.\n")
    assert reports_main(["findings", "--tables", str(built / "tables"), "--readme", str(readme)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Pairs of rows") and "Hand Table 1 · Train PPL · S" in printed
    text = readme.read_text()
    assert text.startswith("# Title\n\nWhat the runs say:\n\n" + START + "\nPairs of rows")
    assert text.endswith(f"{END}\n\nAfter.\n") and "old text" not in text
    assert printed.strip() in text
    assert reports_main(["findings", "--tables", str(built / "tables"), "--readme", str(readme)]) == 0
    assert readme.read_text() == text  # rewriting is idempotent


def test_cli_without_markers_or_tables(built, capsys, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    assert reports_main(["findings", "--tables", str(built / "tables"), "--readme", str(readme)]) == 2
    assert "markers" in capsys.readouterr().err and readme.read_text() == "# no markers\n"
    assert reports_main(["findings", "--tables", str(tmp_path / "none")]) == 0
    assert "The tables were not built" in capsys.readouterr().out
    with pytest.raises(ValueError):
        rewrite_block(f"{END}\n{START}\n", "x")


def test_the_repository_findings_page_has_the_markers():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    assert text.count(START) == 1 and text.count(END) == 1
    assert re.search(r"What the embedded runs say.*" + re.escape(START), text, re.S)


def test_headline_table_quotes_the_embedded_table_and_skips_empty_rows(tmp_path):
    from reports.findings import headline

    assert headline(tmp_path) == ""  # no embedded table built: nothing to show
    printed = {"header": ["", "params", "test PPL", "PPL ÷ oracle"],
               "rows": [["GPT-2 s · base", "1", "22.236 ± 0.4638 (n=3)", "6.8284 ± 0.1424 (n=3)"],
                        ["GPT-2 s · pm", "2", "—", "—"]]}
    (tmp_path / "embedded").mkdir()
    (tmp_path / "embedded" / "foundation.json").write_text(json.dumps({"printed": printed}))
    text = headline(tmp_path)
    assert "| GPT-2 s · base | 22.236 ± 0.4638 (n=3) | 6.8284 ± 0.1424 (n=3) |" in text
    assert "pm" not in text and "params" not in text
