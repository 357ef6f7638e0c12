from reports.timings import job_seconds, timings_table


def _bench(path, seconds):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:01\t100\n")


def test_job_seconds_name_each_job_by_its_owner_and_rank_the_slowest_first(tmp_path):
    _bench(tmp_path / "runs/ncm_s/seed0/logs/pretrain.bench.tsv", 116.5)
    _bench(tmp_path / "runs/ncm_s/seed0/logs/eval_genppl.bench.tsv", 20.0)
    _bench(tmp_path / "data/world/logs/tokenizer.bench.tsv", 40.25)
    (tmp_path / "runs/ncm_s/seed0/logs/eval_cond.bench.tsv").write_text("s\th:m:s\n")  # interrupted: no row
    seconds = job_seconds(tmp_path)
    assert seconds == {"runs/ncm_s/seed0/pretrain": 116.5, "runs/ncm_s/seed0/eval_genppl": 20.0,
                       "data/world/tokenizer": 40.25}
    lines = timings_table(seconds, top=2).splitlines()
    assert lines[0].startswith("runs/ncm_s/seed0/pretrain") and lines[1].startswith("data/world/tokenizer")
    assert lines[-1].endswith("176.8 s over 3 jobs")
