"""A table with rows per corpus (NCM Table 8: TinyStories, LM1B, OpenWebText) takes a run on one of its
corpora in that corpus's rows only; a run on another corpus (the synthetic world) fills the rows naming it."""
import json

from tables.build import NOT_RUN, build

PROVENANCE = {"git_commit": "t", "config_hash": "t", "checkpoint_sha256": None, "versions": {}, "seed": 0,
              "wall_time_s": 0}
SPEC = """rows:
  - {id: ts_ncm, label: NCM, group: TinyStories, corpus: tinystories, result: {experiment: [ncm_s, ncm]}}
  - {id: lm1b_ncm, label: NCM, group: LM1B, corpus: lm1b, result: {experiment: ncm}}
columns:
  - {id: ppl, label: Gen PPL, result: {eval: genppl, key: genppl/ppl}}
"""
LINES = ["t1,ts_ncm,ppl,15.4,1,perplexity,PPL,lower,pdf,", "t1,lm1b_ncm,ppl,93.1,1,perplexity,PPL,lower,pdf,"]
WORLD = {"source": "synthetic", "seed": 0}
LM1B = {"source": "hf", "hf": {"name": "lm1b"}}


def write_run(runs, experiment, corpus, value, profile_corpus):
    path = runs / experiment / "seed0" / "eval" / "genppl.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 1, "experiment": experiment, "seed": 0, "eval": "genppl",
                                "metrics": {"genppl/ppl": value}, "config": {"corpus": corpus},
                                "provenance": PROVENANCE}))
    (runs / "index.json").write_text(json.dumps({"profile": {"corpus": profile_corpus, "scale": "paper"},
                                                 "runs": {f"{experiment}/seed0": ["genppl"]}}))


def cells(hand_paper, runs):
    specs, reported = hand_paper(SPEC, LINES)
    table = build(runs, specs, reported).tables[0]
    return {row: table.cells[(row, "ppl")] for row in ("ts_ncm", "lm1b_ncm")}


def test_a_run_on_one_of_the_tables_corpora_fills_that_corpus_rows_only(hand_paper, tmp_path):
    write_run(tmp_path, "ncm", LM1B, 90.0, "lm1b")
    got = cells(hand_paper, tmp_path)
    assert got["lm1b_ncm"].reproduced.mean == 90.0 and not got["lm1b_ncm"].analogue.startswith("trained on lm1b, the")
    assert got["ts_ncm"].reproduced is None
    assert got["ts_ncm"].absent == NOT_RUN  # this profile does not run TinyStories, not "results missing"


def test_a_run_on_another_corpus_fills_the_rows_naming_it_as_an_analogue(hand_paper, tmp_path):
    write_run(tmp_path, "ncm_s", WORLD, 40.0, "synthetic world")
    got = cells(hand_paper, tmp_path)
    assert got["ts_ncm"].reproduced.mean == 40.0 and "synthetic world" in got["ts_ncm"].analogue
    assert got["lm1b_ncm"].reproduced is None


def test_a_run_on_a_tables_corpus_with_no_row_of_its_own_fills_the_rows_naming_it(hand_paper, tmp_path):
    """A local corpus named like one of the table's corpora, running the embedded ids: no row of its corpus
    lists ncm_s, so it fills the TinyStories row as an analogue, as any other corpus would."""
    write_run(tmp_path, "ncm_s", {"source": "local", "local": {"train": "x.txt", "name": "lm1b"}}, 50.0, "lm1b")
    got = cells(hand_paper, tmp_path)
    assert got["ts_ncm"].reproduced.mean == 50.0 and "trained on lm1b" in got["ts_ncm"].analogue
    assert got["lm1b_ncm"].reproduced is None and got["lm1b_ncm"].absent == NOT_RUN


def test_a_run_without_the_evaluation_is_not_measured_and_a_lost_run_is_missing(hand_paper, tmp_path):
    """The profile runs the experiment but not that evaluation: "not measured by this profile's runs", never
    "not run in this profile"; a run the index lists whose folder is gone: "results missing"."""
    from tables.build import NOT_MEASURED, RESULTS_MISSING

    write_run(tmp_path, "ncm", LM1B, 90.0, "lm1b")
    index = json.loads((tmp_path / "index.json").read_text())
    index["runs"] = {"ncm/seed0": ["recon"]}                      # ncm runs here, without genppl
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert cells(hand_paper, tmp_path)["lm1b_ncm"].absent == NOT_MEASURED
    index["runs"] = {"ncm/seed0": ["genppl"], "ncm/seed1": ["genppl"]}  # seed 1 listed, its folder lost
    (tmp_path / "index.json").write_text(json.dumps(index))
    (tmp_path / "ncm" / "seed0" / "eval" / "genppl.json").unlink()
    assert cells(hand_paper, tmp_path)["lm1b_ncm"].absent == RESULTS_MISSING
