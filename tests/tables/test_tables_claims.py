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


def hand_case(hand_paper, tmp_path, claims, avg=True, extra=(), values=lambda experiment, seeds: seeds):
    """The known-answer paper of test_tables_verdicts with ``claims``: (specs, reported, runs); ``values`` may
    change an experiment's per-seed Train PPL."""
    lines = [f"t1,{row},{column},{value},1,perplexity,PPL,lower,pdf," for row, (ppl, avg_ppl, _) in CASE.items()
             for column, value in (("ppl", ppl), ("avg", avg_ppl)) if avg or column == "ppl"]
    specs, reported = hand_paper(SPEC, lines + list(extra), claims=claims, table="t1")
    runs = tmp_path / "runs"
    for experiment, (_, _, seeds) in CASE.items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value} for value in values(experiment, seeds)])
    return specs, reported, runs


@pytest.fixture
def judged(hand_paper, tmp_path):
    specs, reported, runs = hand_case(hand_paper, tmp_path, CLAIMS, extra=[
        "t1,base_m,wiki,22.0,1,perplexity,PPL,lower,pdf,", "t1,concept_m,wiki,21.0,1,perplexity,PPL,lower,pdf,"])
    built = build(runs, specs, reported)
    return (built, {claim.id: claim for claim in built.claims}, write_tables(built, tmp_path / "tables"),
            tmp_path / "tables")


def test_an_ordering_claim_that_holds_is_reproduced(judged):
    _, claims, _, _ = judged
    claim = claims["concept_below_base_s"]
    (part,) = claim.parts
    assert (claim.kind, claim.verdict, part.sign, part.paper_effect) == \
        ("ordering", "reproduced", -1, pytest.approx(-2.0))
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
    assert claim.verdict == "inconclusive" and "could see |d| ≥" in claim.reason


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
    specs, reported, runs = hand_case(hand_paper, tmp_path, CLAIMS, avg=False)
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
    assert mechanism.reason == "mechanism not exercised: swap |0.0001| <= 0.3 (3 × seed sd of mech/intact_nll, n=3)"
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
    write_results(runs, "concept_s", "mechanisms", [{"mech/intact_nll": 2.0 + 0.01 * k, "mech/swap": 0.5,
                                                     "mech/ncp_r2": 0.2}
                                                    for k in (-1, 0, 1)])
    for seed in range(3):
        path = runs / "concept_s" / f"seed{seed}" / "eval" / "mechanisms.json"
        result = json.loads(path.read_text())
        path.write_text(json.dumps({**result, "details": {"checks": checks}}))
    mechanism = build(runs, specs, reported).mechanisms["concept_s"]
    assert mechanism.exercised and [check.passed for check in mechanism.checks] == [True, True]
    text = mechanisms_markdown({"concept_s": mechanism})
    assert "1 concept-model experiments: 1 ran the mechanism checks, 1 exercised their mechanism." in text
    assert "| concept_s | swap | gate | 0.5 | \\|effect\\| > 0.03 | 3 × seed sd of mech/intact_nll, n=3 | yes |" in text


def test_a_gate_cannot_pass_on_no_effect_and_an_unchecked_concept_model_is_not_shown_exercised(tmp_path):
    from tables.mechanisms import judge, unexercised
    from tables.results import Reproduced

    checks = [{"name": "swap", "key": "mech/swap", "kind": "spread", "gate": True}]
    identical = {("c", "mechanisms", "mech/intact_nll"): Reproduced({0: 2.0, 1: 2.0, 2: 2.0}),
                 ("c", "mechanisms", "mech/swap"): Reproduced({0: 0.0, 1: 0.0, 2: 0.0})}
    mechanism = judge("c", checks, identical)  # seeds that agree: the noise floor, and strictly above it
    assert not mechanism.exercised and mechanism.checks[0].basis.startswith("the profile's noise floor")
    unchecked = judge("u", [], {})
    assert not unchecked.checked and not unchecked.exercised
    assert unexercised({"u": unchecked}, ("u",)).startswith("u: mechanism not checked")
    negative = judge("c", checks, {**identical,
                                   ("c", "mechanisms", "mech/swap"): Reproduced({0: -0.2, 1: -0.2, 2: -0.2})})
    assert negative.exercised and negative.checks[0].text.startswith("swap |-0.2| > 0.01")


MORE = """
- id: above_constant
  where: "S"
  text: "Base's Train PPL is above 10 at S"
  formula: "cell('t1', 'base_s', 'ppl') > 10"
  source: pdf
- id: chained
  where: "S"
  text: "ConceptLM < Base < PM at S"
  formula: "cell('t1', 'concept_s', 'ppl') < cell('t1', 'base_s', 'ppl') < cell('t1', 'pm_s', 'ppl')"
  source: pdf
- id: mixed_proxy
  where: "S"
  text: "ConceptLM's Avg PPL is below Base's at S"
  formula: "cell('t1', 'concept_s', 'avg') < cell('t1', 'base_s', 'avg')"
  source: pdf
- id: ratio_undefined
  where: "S"
  text: "a ratio"
  printed: "1.5"
  formula: "cell('t1', 'base_s', 'ppl') / (cell('t1', 'base_s', 'ppl') - cell('t1', 'base_s', 'ppl'))"
  source: pdf
"""


@pytest.fixture
def more(hand_paper, tmp_path):
    specs, reported, runs = hand_case(hand_paper, tmp_path, MORE)
    # only Base has the real Avg PPL (its WikiText PPL): a part must not compare it with ConceptLM's proxy
    write_results(runs, "base_s", "lm_ppl", [{"wikitext/ppl": 40.0 + k} for k in range(3)])
    return {claim.id: claim for claim in build(runs, specs, reported).claims}


def test_a_comparison_with_a_constant_is_a_one_sample_test(more):
    (part,) = more["above_constant"].parts
    assert part.right.paper == 10 and part.paper_effect == pytest.approx(20.0)
    assert part.test is not None and part.test.paired and part.d == pytest.approx(10.0)
    assert more["above_constant"].verdict == "reproduced"


def test_a_chained_comparison_is_split_into_its_links(more):
    claim = more["chained"]
    assert [(p.left.text[-21:], p.right.text[-21:]) for p in claim.parts] == [
        ("ConceptLM (S) · Train PPL"[-21:], "Table 1 · Base (S) · Train PPL"[-21:]),
        ("Table 1 · Base (S) · Train PPL"[-21:], "Table 1 · PM (S) · Train PPL"[-21:])]
    assert [p.outcome for p in claim.parts] == ["reproduced", "reproduced"]


def test_a_part_reads_both_sides_through_the_proxy_or_neither(more):
    (part,) = more["mixed_proxy"].parts
    assert part.left.proxies and part.right.proxies  # Base's real Avg PPL is not compared with ConceptLM's proxy
    assert part.d == pytest.approx(18.0 - 20.0) and more["mixed_proxy"].verdict == "reproduced"


def test_a_formula_our_values_make_undefined_is_said_not_raised(more):
    claim = more["ratio_undefined"]
    assert claim.verdict == "out of range" and "undefined" in claim.reason


def test_fixed_columns_and_out_of_range_cells_have_their_own_outcomes():
    from tables.claims import FIXED, OUT_OF_RANGE, Part, Side
    from tables.ordering import Estimate

    ours = Estimate(1.0, 0.1, 3, {0: 0.9, 1: 1.0, 2: 1.1})
    fixed = Part(Side("NFE a", 12, ours, (), fixed=("NFE",)), Side("NFE b", 128, ours, ()), -1)
    assert fixed.outcome == FIXED and fixed.reason == "NFE: fixed by the design"
    flagged = Part(Side("Gen PPL a", 1.0, ours, (), flags=("Gen PPL 3.9e+04 above 2048: x",)),
                   Side("b", 2.0, ours, ()), -1,
                   idle="a: mechanism not exercised")
    assert flagged.outcome == OUT_OF_RANGE and flagged.reason == "Gen PPL 3.9e+04 above 2048: x"


def test_a_value_at_paper_scale_is_read_with_its_printed_precision():
    from tables.claims import ClaimVerdict, Side
    from tables.numbers import parse_printed
    from tables.ordering import from_seeds

    ours = from_seeds({0: 3.915, 1: 3.921, 2: 3.925})
    near = ClaimVerdict("p", "c", "w", "t", "value", value=Side("ratio", 3.92, ours, ()), printed=3.9, scale="paper",
                        printed_number=parse_printed("~3.9"))
    assert near.verdict == "reproduced"  # [3.908, 3.933] meets ~3.9 within twice its half unit
    exact = ClaimVerdict("p", "c", "w", "t", "value", value=Side("ratio", 3.92, ours, ()), printed=3.8, scale="paper",
                         printed_number=parse_printed("3.8"))
    assert exact.verdict == "contradicted"


def test_a_diverged_seed_is_said_in_the_cell_and_stops_the_claim(hand_paper, tmp_path):
    def diverge(experiment, seeds):  # PM diverged at every seed, ConceptLM at its third
        values = [float("nan") if experiment == "pm_s" else v for v in seeds]
        return [float("inf") if (experiment, k) == ("concept_s", 2) else v for k, v in enumerate(values)]

    specs, reported, runs = hand_case(hand_paper, tmp_path, CLAIMS, avg=False, values=diverge)
    built = build(runs, specs, reported)
    view = built.tables[0]
    assert view.cells["pm_s", "ppl"].reproduced is None
    assert view.cells["pm_s", "ppl"].verdict == "diverged: non-finite at seeds 0, 1, 2"
    assert (view.cells["concept_s", "ppl"].reproduced.n == 2
            and "diverged: non-finite at seed 2" in view.cells["concept_s", "ppl"].verdict)
    claims = {claim.id: claim for claim in built.claims}
    assert claims["pm_below_base_s"].verdict == "out of range" and "diverged" in claims["pm_below_base_s"].reason


def test_a_claim_the_papers_own_cells_go_against_says_so(judged):
    from tables.claims import claim_record

    claim = judged[1]["concept_best_every_size"]
    assert claim.paper_against == ""  # the hand-made paper's cells agree with its claim
    flipped = judged[1]["pm_below_base_s"]
    assert flipped.paper_against == "" and claim_record(flipped)["paper_against"] == ""


def test_results_of_another_config_are_refused_or_marked_stale(tmp_path):
    from common.errors import ReproError
    from common.io import config_hash

    runs = tmp_path / "runs"
    write_results(runs, "base_gpt2_s", "ppl", [{"test/ppl": 20.0}])
    path = runs / "base_gpt2_s" / "seed0" / "eval" / "ppl.json"
    result = json.loads(path.read_text())
    config = {"seed": 0, "train": {"lr": 0.003}, "model": {"arch": "gpt2"}}
    path.write_text(json.dumps({**result, "config": config, "provenance": {**result["provenance"],
                                                                         "config_hash": config_hash(config)}}))
    now = {**config, "train": {"lr": 0.001}}
    expected = {"base_gpt2_s/seed0": {"hash": config_hash(now),
                                      "sections": {k: config_hash(v) for k, v in now.items()}}}
    with pytest.raises(ReproError, match=r"1 run\(s\) hold results of another config or other files "
                                         r"than the profile's: "
                                         r".*base_gpt2_s/seed0 \(train differ\)") as error:
        build(runs, expected=expected)
    assert "\n" not in str(error.value)
    stale = build(runs, expected=expected, allow_stale=True)
    cell = next(v for v in stale.tables if v.spec.table == "foundation").cells["base_gpt2_s", "test_ppl"]
    assert cell.reproduced.mean == 20.0 and any(c.startswith("stale: ") for c in cell.reproduced.caveats)
    assert build(runs, expected={"base_gpt2_s/seed0": {"hash": config_hash(config), "sections": {}}}).tables


def test_results_from_other_weights_data_or_upstream_are_refused(tmp_path):
    """Same config, other files: the result scored other weights than the run's final/, the run trained on other
    token files than its dataset holds now, or built on other upstream weights: each named in the one line."""
    from common.errors import ReproError
    from common.io import config_hash

    runs = tmp_path / "runs"
    config = {"seed": 0, "train": {"lr": 0.003}}
    for exp in ("base_gpt2_s", "conceptlm_gpt2_s"):
        write_results(runs, exp, "ppl", [{"test/ppl": 20.0}])
        path = runs / exp / "seed0" / "eval" / "ppl.json"
        result = json.loads(path.read_text())
        path.write_text(json.dumps({**result, "config": config, "provenance": {
            **result["provenance"], "config_hash": config_hash(config), "checkpoint_sha256": "a" * 64}}))
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokenizer_sha256": "t", "splits": {"train": {"sha256": "x"}}}))
    data = {"tokenizer_sha256": "t", "splits": {"train": "x"}}

    def final(exp: str, **fields) -> None:
        (runs / exp / "seed0" / "final").mkdir(parents=True, exist_ok=True)
        manifest = {"model_sha256": "a" * 64, "data": data, **fields}
        (runs / exp / "seed0" / "final" / "manifest.json").write_text(json.dumps(manifest))

    final("base_gpt2_s")
    final("conceptlm_gpt2_s", upstream={"experiment": "base_gpt2_s", "seed": 0, "model_sha256": "a" * 64})
    expected = {f"{exp}/seed0": {"hash": config_hash(config), "sections": {}, "tokens": str(tokens),
                                 "upstream": "base_gpt2_s/seed0" if exp.startswith("concept") else None}
                for exp in ("base_gpt2_s", "conceptlm_gpt2_s")}
    assert build(runs, expected=expected).tables  # everything matches
    tokens.write_text(json.dumps({"tokenizer_sha256": "t", "splits": {"train": {"sha256": "y"}}}))
    with pytest.raises(ReproError, match=r"base_gpt2_s/seed0 \(data differ\).*conceptlm_gpt2_s/seed0 \(data differ\)"):
        build(runs, expected=expected)
    tokens.write_text(json.dumps({"tokenizer_sha256": "t", "splits": {"train": {"sha256": "x"}}}))
    final("base_gpt2_s", model_sha256="b" * 64)  # base re-trained: its results and conceptlm's upstream are stale
    with pytest.raises(ReproError, match=r"base_gpt2_s/seed0 \(checkpoint differ\).*conceptlm_gpt2_s/seed0 "
                                         r"\(upstream differ\)") as error:
        build(runs, expected=expected)
    assert "\n" not in str(error.value)


TIES = """
- id: tie_differs
  where: "S"
  text: "PM ties Base at S"
  formula: "cell('t1', 'pm_s', 'ppl') == cell('t1', 'base_s', 'ppl')"
  source: pdf
- id: tie_unresolved
  where: "XS"
  text: "ConceptLM ties Base at XS"
  formula: "cell('t1', 'concept_xs', 'ppl') == cell('t1', 'base_xs', 'ppl')"
  source: pdf
- id: tie_same_numbers
  where: "S"
  text: "the same run prints the same number"
  formula: "cell('t1', 'base_s', 'ppl') == cell('t1', 'base_s', 'ppl')"
  source: pdf
"""


def test_a_tie_is_contradicted_by_a_significant_difference_never_reproduced_and_one_run_is_no_finding(hand_paper,
                                                                                                      tmp_path):
    specs, reported, runs = hand_case(hand_paper, tmp_path, TIES)
    claims = {claim.id: claim for claim in build(runs, specs, reported).claims}
    differs, unresolved, same = claims["tie_differs"], claims["tie_unresolved"], claims["tie_same_numbers"]
    assert differs.kind == "ordering" and differs.parts[0].sign == 0
    assert differs.verdict == "contradicted" and differs.parts[0].d == pytest.approx(2.0)  # ours: PM 2 above Base
    assert differs.reason == "a tie, and the difference is significant"
    assert unresolved.verdict == "inconclusive" and "could see |d| ≥" in unresolved.reason
    assert "can be contradicted, not reproduced" in unresolved.reason
    assert same.verdict == "value shown, not judged"  # one run fills both cells: equal by construction
    assert same.parts[0].outcome == "fixed by the design" and same.parts[0].reason.startswith("one run fills both")
    from tables.claims import part_record
    assert part_record(differs.parts[0])["claimed"] == "equal"


def test_a_tie_one_run_fills_is_outside_the_holm_family_and_the_claim_says_why(hand_paper, tmp_path):
    claims = """
- id: with_identity
  where: "XS"
  text: "ConceptLM is below Base at XS, and the same run prints the same number"
  formula: "cell('t1', 'base_s', 'ppl') == cell('t1', 'base_s', 'ppl') and \
cell('t1', 'concept_xs', 'ppl') < cell('t1', 'base_xs', 'ppl')"
  source: pdf
- id: alone
  where: "XS"
  text: "ConceptLM is below Base at XS"
  formula: "cell('t1', 'concept_xs', 'ppl') < cell('t1', 'base_xs', 'ppl')"
  source: pdf
- id: identity_only
  where: "S"
  text: "the same run prints the same number"
  formula: "cell('t1', 'base_s', 'ppl') == cell('t1', 'base_s', 'ppl') * 1.1 / 1.1"
  source: pdf
- id: printed_zero
  where: "S"
  text: "PM and Base are printed 0 apart"
  printed: "0"
  formula: "cell('t1', 'pm_s', 'ppl') - cell('t1', 'base_s', 'ppl')"
  source: pdf
"""
    separated = lambda experiment, seeds: [24.0, 24.4, 23.6] if experiment == "concept_xs" else seeds  # noqa: E731
    specs, reported, runs = hand_case(hand_paper, tmp_path, claims, values=separated)
    judged = {claim.id: claim for claim in build(runs, specs, reported).claims}
    identity, ordering = judged["with_identity"].parts
    assert identity.test is None and identity.outcome == "fixed by the design"
    assert ordering.family == judged["alone"].parts[0].family == 1  # the identity does not dilute Holm
    assert ordering.p_adjusted == pytest.approx(judged["alone"].parts[0].p_adjusted)
    only = judged["identity_only"]  # equal to float rounding: still one run, not a finding
    assert (only.verdict == "value shown, not judged"
            and only.reason == "one run fills both cells: equal by construction")
    assert only.paper_against == ""  # the paper's 30.0 against 30.0 * 1.1 / 1.1: rounding, not an effect
    zero = judged["printed_zero"]
    assert zero.kind == "ordering" and zero.parts[0].sign == 0 and zero.verdict == "contradicted"


def test_the_forest_names_tested_ties_it_cannot_scale():
    from reports.claims import forest

    part = {"test": "paired", "paper_effect": 0.0, "claimed": "equal", "left": "NCM + MBR", "right": "AR", "d": -19.6,
            "ci_low": -24.8, "ci_high": -14.5, "outcome": "contradicted"}
    image, caption = forest("ncm", [{"kind": "ordering", "id": "ties_ar", "parts": [part]}])
    assert (image is None and "Ties" in caption
            and "ties_ar: NCM + MBR − AR = -19.6 [-24.8, -14.5], contradicted" in caption)
