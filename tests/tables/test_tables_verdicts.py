"""Pair verdicts through the builder, on per-seed results written here: the answer of each pair is known."""
import json

import pytest

from tables.build import build
from tables.publish import write_tables

PROVENANCE = {"git_commit": "t", "config_hash": "t", "checkpoint_sha256": None, "versions": {}, "seed": 0,
              "wall_time_s": 0}
SPEC = """rows:
  - {id: base_s, label: Base, group: S, result: {experiment: base_s}}
  - {id: pm_s, label: PM, group: S, result: {experiment: pm_s}}
  - {id: concept_s, label: ConceptLM, group: S, result: {experiment: concept_s}}
  - {id: base_xs, label: Base, group: XS, result: {experiment: base_xs}}
  - {id: concept_xs, label: ConceptLM, group: XS, result: {experiment: concept_xs}}
  - {id: base_m, label: Base, group: M, result: {experiment: base_m}}
  - {id: concept_m, label: ConceptLM, group: M, result: {experiment: concept_m}}
columns:
  - {id: ppl, label: Train PPL, result: {eval: ppl, key: test/ppl}}
  - {id: wiki, label: Wiki PPL, result: {eval: lm_ppl, key: wikitext/ppl}}
  - {id: avg, label: Avg PPL, formula: "mean(ppl, wiki)", order_proxy: ppl}
"""
# (paper Train PPL, paper Avg PPL, our per-seed test/ppl); lower is better
CASE = {
    "base_s": ("30.0", "50.0", [20.0, 20.2, 19.8]),
    "pm_s": ("29.0", "48.0", [22.0, 22.1, 21.9]),       # paper: PM < Base; ours: PM > Base by 2, se 0.13 -> differs
    "concept_s": ("28.0", "45.0", [18.0, 18.1, 17.9]),  # paper and ours: ConceptLM < Base, < PM -> agrees twice
    "base_xs": ("40.0", "60.0", [25.0, 25.4, 24.6]),
    "concept_xs": ("39.0", "59.0", [24.9, 25.3, 24.5]),  # gap 0.1, se 0.33 -> inconclusive
    "base_m": ("20.0", "40.0", [15.0]),                  # one seed -> inconclusive (n=1)
    "concept_m": ("19.0", "38.0", [14.0, 14.1, 13.9]),
}


def write_results(runs, experiment, eval_name, per_seed):
    for seed, metrics in enumerate(per_seed):
        path = runs / experiment / f"seed{seed}" / "eval" / f"{eval_name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schema_version": 1, "experiment": experiment, "seed": seed, "eval": eval_name,
                                    "metrics": metrics, "provenance": {**PROVENANCE, "seed": seed}}))


@pytest.fixture
def case(hand_paper, tmp_path):
    lines = []
    for row, (ppl, avg, _) in CASE.items():
        lines += [f"t1,{row},ppl,{ppl},1,perplexity,PPL,lower,pdf,", f"t1,{row},avg,{avg},1,perplexity,PPL,lower,pdf,"]
    specs, reported = hand_paper(SPEC, lines, table="t1")
    runs = tmp_path / "runs"
    for experiment, (_, _, seeds) in CASE.items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value} for value in seeds])
    built = build(runs, specs, reported)
    return built.tables[0], write_tables(built, tmp_path / "tables"), tmp_path / "tables"


def outcomes(order):
    return {(pair.a, pair.b): (pair.outcome, pair.reason) for pair in order.pairs}


def test_each_pair_gets_its_known_verdict(case):
    view, _, _ = case
    order = view.orders["ppl"]
    assert order.proxy is None
    assert outcomes(order) == {("base_s", "pm_s"): ("differs", ""), ("base_s", "concept_s"): ("agrees", ""),
                               ("pm_s", "concept_s"): ("agrees", ""),
                               ("base_xs", "concept_xs"): ("inconclusive", "p=0.77; could see |d| ≥ 1.81"),
                               ("base_m", "concept_m"): ("inconclusive", "n=1")}
    assert order.verdict == "agrees 2 / differs 1 / inconclusive 2 / not exercised 0"
    assert [order.summary(group) for group in order.groups] == [
        "agrees 2 / differs 1 / inconclusive 0 / not exercised 0",
        "agrees 0 / differs 0 / inconclusive 1 / not exercised 0",
        "agrees 0 / differs 0 / inconclusive 1 / not exercised 0"]
    # the hand-made runs record no corpus and no profile: analogues, their order still judged
    assert view.cells["pm_s", "ppl"].verdict == "analogue; order agrees vs ConceptLM; differs vs Base"
    assert view.cells["concept_xs", "ppl"].verdict == \
        "analogue; order inconclusive vs Base (p=0.77; could see |d| ≥ 1.81)"
    assert view.cells["concept_m", "ppl"].verdict == "analogue; order inconclusive vs Base (n=1)"


def test_a_proxy_column_is_labelled_everywhere_and_counted_apart(case):
    view, index, out = case
    order = view.orders["avg"]
    assert order.proxy == "ppl" and order.verdict.startswith("proxy: ")
    assert all(pair.verdict.startswith("proxy: ") for pair in order.pairs)
    for row in CASE:
        assert view.cells[row, "avg"].verdict.startswith("not measured by this profile's runs; proxy: order "), row
    entry = index["tables"][0]
    assert entry["ordering"] == {"agrees": 2, "differs": 1, "inconclusive": 2, "not exercised": 0, "proxy": 5,
                                 "tied": 0}
    assert index["verdicts"]["pairs_agrees"] == 2 and index["verdicts"]["pairs_proxy"] == 5
    text = (out / "hand" / "t1.md").read_text()
    assert "Avg PPL (paper) against Train PPL (ours, a proxy): proxy: agrees" in text
    assert "a proxy: neither agreement nor disagreement" in text
    table = json.loads((out / "hand" / "t1.json").read_text())
    proxies = [record for record in table["order_pairs"] if record["proxy"]]
    assert len(proxies) == 5 and all(record["verdict"].startswith("proxy: ") for record in proxies)


def test_the_pairs_view_shows_difference_and_standard_error(case):
    _, _, out = case
    table = json.loads((out / "hand" / "t1.json").read_text())
    record = next(r for r in table["order_pairs"] if (r["column"], r["a"], r["b"]) == ("ppl", "base_s", "pm_s"))
    assert (record["paper_difference"], record["d"], record["se"]) == ("1.0", "-2", "0.1291")
    assert (record["n_a"], record["n_b"], record["verdict"]) == (3, 3, "differs")
    single = next(r for r in table["order_pairs"] if (r["column"], r["a"]) == ("ppl", "base_m"))
    assert (single["se"], single["single"], single["verdict"]) == ("", ["Base"], "inconclusive (n=1)")
    assert ("| Train PPL | S | Base − PM | 30.0 vs 29.0 | 1.0 | 20 vs 22 | -2 [-2.4155, -1.5845] "
            "| Welch (0.002) | 3, 3 "
            "| differs (analogue) |") in (
        out / "hand" / "t1.md").read_text()


def test_conceptlm_train_ppl_cells_are_compared_directly(tmp_path):
    """The paper's own train-distribution PPL (Table 1) against our test/ppl: like with like, never a proxy."""
    runs = tmp_path / "runs"
    ours = {"base_gpt2_s": 27.6, "pm_gpt2_s": 33.8, "conceptlm_gpt2_s": 63.0, "contextlm_pythia_xs": 24.4,
            "conceptlm_pythia_xs": 25.4, "contextlm_pythia_m": 13.7, "conceptlm_pythia_m": 14.8}
    for experiment, value in ours.items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value + 0.1 * k} for k in (-1, 0, 1)])
    view = next(v for v in build(runs).tables if (v.spec.paper, v.spec.table) == ("conceptlm", "table01"))
    order = view.orders["train_ppl"]
    assert order.proxy is None
    printed = {(pair.a, pair.b): pair.reported for pair in order.pairs}
    assert printed == {("gpt2_355m_base", "gpt2_355m_pm"): (17.97, 17.67),
                       ("gpt2_355m_base", "gpt2_355m_conceptlm"): (17.97, 16.81),
                       ("gpt2_355m_pm", "gpt2_355m_conceptlm"): (17.67, 16.81),
                       ("pythia_70m_contextlm", "pythia_70m_conceptlm"): (14.96, 15.00),
                       ("pythia_410m_contextlm", "pythia_410m_conceptlm"): (8.67, 8.70)}
    assert order.verdict == "agrees 2 / differs 3 / inconclusive 0 / not exercised 0"
    assert view.orders["avg_ppl"].proxy == "train_ppl" and view.orders["avg_ppl"].verdict.startswith("proxy: ")
    assert view.cells["gpt2_355m_pm", "train_ppl"].verdict == "analogue; order differs vs Base, ConceptLM"
