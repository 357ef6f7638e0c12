"""The papers' claims judged on our runs (tables/claims.py): known answers through the builder."""
import json

import pytest

from tables.build import build
from tables.publish import write_tables
from tests.tables.test_tables_verdicts import CASE, SPEC, write_results

CLAIMS = """
- id: concept_below_base_s
  where: "Sec. 1"
  text: "ConceptLM has a lower Train PPL than Base at S"
  formula: "cell('t1', 'concept_s', 'ppl') < cell('t1', 'base_s', 'ppl')"
  source: pdf
- id: pm_below_base_s
  where: "Sec. 1"
  text: "PM is 1.0 below Base at S"
  printed: "1.0"
  formula: "cell('t1', 'base_s', 'ppl') - cell('t1', 'pm_s', 'ppl')"
  source: pdf
- id: concept_best_every_size
  where: "Sec. 2"
  text: "ConceptLM is best at every size"
  formula: >-
    cell('t1', 'concept_s', 'ppl') <= min(cell('t1', 'base_s', 'ppl'), cell('t1', 'pm_s', 'ppl'))
    and cell('t1', 'concept_xs', 'ppl') < cell('t1', 'base_xs', 'ppl')
  source: pdf
- id: concept_m_wiki
  where: "Sec. 3"
  text: "ConceptLM beats Base on WikiText at M"
  formula: "cell('t1', 'concept_m', 'wiki') < cell('t1', 'base_m', 'wiki')"
  source: pdf
- id: avg_through_proxy
  where: "Sec. 3"
  text: "ConceptLM has the lower Avg PPL at S"
  formula: "cell('t1', 'concept_s', 'avg') < cell('t1', 'base_s', 'avg')"
  source: pdf
- id: ratio_value
  where: "Sec. 4"
  text: "Base / ConceptLM Train PPL is 1.07 at S"
  printed: "1.07"
  formula: "cell('t1', 'base_s', 'ppl') / cell('t1', 'concept_s', 'ppl')"
  source: pdf
- id: constants_only
  where: "App."
  text: "64^12 is large"
  formula: "64 ** 12 > 50000 ** 4"
  source: pdf
"""


@pytest.fixture
def judged(hand_paper, tmp_path):
    lines = []
    for row, (ppl, avg, _) in CASE.items():
        lines += [f"t1,{row},ppl,{ppl},1,perplexity,PPL,lower,pdf,", f"t1,{row},avg,{avg},1,perplexity,PPL,lower,pdf,"]
    lines += ["t1,base_m,wiki,22.0,1,perplexity,PPL,lower,pdf,", "t1,concept_m,wiki,21.0,1,perplexity,PPL,lower,pdf,"]
    specs, reported = hand_paper(SPEC, lines, claims=CLAIMS, table="t1")
    runs = tmp_path / "runs"
    for experiment, (_, _, seeds) in CASE.items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value} for value in seeds])
    built = build(runs, specs, reported)
    return built, {claim.id: claim for claim in built.claims}, write_tables(built, tmp_path / "tables"), tmp_path / "tables"


def test_an_ordering_claim_that_holds_is_reproduced(judged):
    _, claims, _, _ = judged
    claim = claims["concept_below_base_s"]
    (part,) = claim.parts
    assert (claim.kind, claim.verdict, part.sign, part.paper_effect) == ("ordering", "reproduced", -1, pytest.approx(-2.0))
    assert part.d == pytest.approx(-2.0) and part.test.kind == "Welch" and part.p_adjusted < 0.05


def test_a_printed_difference_is_an_ordering_with_the_printed_sign(judged):
    claim = judged[1]["pm_below_base_s"]
    (part,) = claim.parts
    assert part.sign == 1 and part.d == pytest.approx(-2.0)  # ours: PM above Base
    assert claim.verdict == "contradicted"


def test_max_and_min_split_into_parts_and_holm_spans_the_claim(judged):
    claim = judged[1]["concept_best_every_size"]
    assert [(p.left.text, p.right.text) for p in claim.parts] == [
        ("Table 1 · ConceptLM (S) · Train PPL", "Table 1 · Base (S) · Train PPL"),
        ("Table 1 · ConceptLM (S) · Train PPL", "Table 1 · PM (S) · Train PPL"),
        ("Table 1 · ConceptLM (XS) · Train PPL", "Table 1 · Base (XS) · Train PPL")]
    assert all(part.family == 3 for part in claim.parts)
    assert [part.outcome for part in claim.parts] == ["reproduced", "reproduced", "inconclusive"]
    assert claim.verdict == "inconclusive" and "could see |d| ≥" in claim.reason and "the paper's -1" in claim.reason


def test_a_claim_on_cells_nobody_runs_is_not_run_here(judged):
    claim = judged[1]["concept_m_wiki"]
    assert claim.verdict == "not run here" and claim.parts[0].missing
    assert [ref.eval for ref in claim.not_run_refs] == ["lm_ppl", "lm_ppl"]


def test_a_column_with_an_order_proxy_is_judged_through_it_and_says_so(judged):
    built, claims, index, out = judged
    claim = claims["avg_through_proxy"]
    assert claim.verdict == "reproduced" and claim.proxies == ["Avg PPL through Train PPL"]
    record = next(r for r in json.loads((out / "hand" / "claims.json").read_text())["claims"] if r["id"] == claim.id)
    assert record["shown"] == "proxy: reproduced"
    assert index["claims"]["hand"]["proxy"] == 1 and index["claims"]["hand"]["reproduced"] == 1


def test_a_value_claim_at_reduced_scale_is_shown_not_judged(judged):
    claim = judged[1]["ratio_value"]
    assert claim.kind == "value" and claim.verdict == "value shown, not judged"
    low, high = claim.interval
    assert low < 20.0 / 18.0 < high and claim.printed == pytest.approx(1.07)


def test_constants_are_no_claim_about_runs(judged):
    assert "constants_only" not in judged[1]


def test_claims_of_an_arm_whose_mechanism_failed_are_not_exercised(hand_paper, tmp_path):
    lines = [f"t1,{row},ppl,{ppl},1,perplexity,PPL,lower,pdf," for row, (ppl, _, _) in CASE.items()]
    specs, reported = hand_paper(SPEC, lines, claims=CLAIMS, table="t1")
    runs = tmp_path / "runs"
    for experiment, (_, _, seeds) in CASE.items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value} for value in seeds])
    checks = [{"name": "swap", "key": "mech/swap", "kind": "spread", "gate": True, "what": "another window's concepts"}]
    for seed, (intact, swap) in enumerate([(2.0, 0.0001), (2.1, 0.0002), (1.9, 0.0)]):
        path = runs / "concept_s" / f"seed{seed}" / "eval" / "mechanisms.json"
        path.write_text(json.dumps({"schema_version": 1, "experiment": "concept_s", "seed": seed, "eval": "mechanisms",
                                    "metrics": {"mech/intact_nll": intact, "mech/swap": swap},
                                    "details": {"checks": checks},
                                    "provenance": {"git_commit": "t", "config_hash": "t", "checkpoint_sha256": None,
                                                   "versions": {}, "seed": seed, "wall_time_s": 0}}))
    built = build(runs, specs, reported)
    mechanism = built.mechanisms["concept_s"]
    assert not mechanism.exercised and mechanism.spread == pytest.approx(0.1)
    assert mechanism.reason == "mechanism not exercised: swap 0.0001 < 0.3 (3 × seed sd of mech/intact_nll, n=3)"
    claims = {claim.id: claim for claim in built.claims}
    assert claims["concept_below_base_s"].verdict == "mechanism not exercised"
    assert claims["pm_below_base_s"].verdict == "contradicted"  # no concept arm: judged as before
    order = next(view for view in built.tables).orders["ppl"]
    assert {(p.a, p.b): p.outcome for p in order.pairs}[("base_s", "concept_s")] == "not exercised"


def test_a_claim_naming_a_cell_no_spec_defines_is_refused_by_the_profile_check(tmp_path, monkeypatch):
    """Before any job: ``python -m workflows.experiments`` (make's pre-check) loads the claims."""
    import shutil

    import tables.build
    from workflows.experiments import ConfigError, check_tables

    reported = tmp_path / "reported"
    shutil.copytree(tables.build.REPORTED, reported)
    claims = reported / "dlcm" / "claims.yaml"
    claims.write_text(claims.read_text().replace("cell('table04', 'global_parser'", "cell('table04', 'no_such_row'", 1))
    monkeypatch.setattr(tables.build, "REPORTED", reported)
    with pytest.raises(ConfigError) as error:
        check_tables()
    message = str(error.value)
    assert "\n" not in message and "claims.yaml" in message and "no_such_row" in message


def test_the_findings_open_with_the_claims_and_every_number_is_in_claims_md(judged):
    from reports.findings import collect, findings_markdown, untraceable

    _, _, _, out = judged
    findings = collect(out)
    text = findings_markdown(findings, out)
    assert text.startswith("The papers' claims judged on our runs")
    head = findings.claims[0]
    assert head.startswith("**hand** (hand/claims.md): 6 claims about runs: 1 reproduced, 1 contradicted, "
                           "1 inconclusive, 1 not run here, 1 value shown, not judged, 1 proxy.")
    claims_md = (out / "hand" / "claims.md").read_text()
    for line in findings.claims[1:]:
        if line.startswith("- "):
            assert untraceable(line, claims_md) == [], line


def test_the_mechanism_table_lists_every_check_with_its_threshold(hand_paper, tmp_path):
    from tables.mechanisms import mechanisms_markdown

    specs, reported = hand_paper(SPEC, [], claims=None, table="t1")
    runs = tmp_path / "runs"
    checks = [{"name": "swap", "key": "mech/swap", "kind": "spread", "gate": True, "what": "another window's concepts"},
              {"name": "ncp_r2", "key": "mech/ncp_r2", "kind": "floor", "floor": 0.0, "gate": True, "what": "R²"}]
    write_results(runs, "concept_s", "mechanisms", [{"mech/intact_nll": 2.0 + 0.01 * k, "mech/swap": 0.5, "mech/ncp_r2": 0.2}
                                                    for k in (-1, 0, 1)])
    for seed in range(3):
        path = runs / "concept_s" / f"seed{seed}" / "eval" / "mechanisms.json"
        result = json.loads(path.read_text())
        path.write_text(json.dumps({**result, "details": {"checks": checks}}))
    mechanism = build(runs, specs, reported).mechanisms["concept_s"]
    assert mechanism.exercised and [check.passed for check in mechanism.checks] == [True, True]
    text = mechanisms_markdown({"concept_s": mechanism})
    assert "1 of 1 experiments exercised their mechanism." in text
    assert "| concept_s | swap | gate | 0.5 | \\|effect\\| ≥ 0.03 | 3 × seed sd of mech/intact_nll, n=3 | yes |" in text
