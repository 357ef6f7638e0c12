"""Parity with the unforked harness: our GPT-2 exported to a transformers folder and evaluated by
lm-eval's own ``hf`` backend gives the same per-request log-likelihoods, greedy flags, rolling sums
and greedy generations as our adapter, through ``lm_eval.simple_evaluate`` on small tasks (the
embedded tasks and a generation task over the same data; contexts longer than the 64-token window
exercise left truncation in both).
"""
from __future__ import annotations

import pytest
import yaml

TASKS = ["embedded_cloze", "embedded_choice", "embedded_ppl", "embedded_gen"]


@pytest.fixture(scope="module")
def task_dir(embedded_dir, tmp_path_factory):
    """The embedded tasks plus a generate_until task over the cloze data (stop at '.', 6 tokens)."""
    cfg = yaml.safe_load((embedded_dir / "embedded_cloze.yaml").read_text())
    cfg.update(task="embedded_gen", output_type="generate_until", metric_list=[
        {"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}],
        generation_kwargs={"until": ["."], "max_gen_toks": 6, "do_sample": False})
    (embedded_dir / "embedded_gen.yaml").write_text(yaml.safe_dump(cfg))
    return embedded_dir


def _evaluate(lm, task_dir):
    import lm_eval
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(task_dir), include_defaults=False)
    return lm_eval.simple_evaluate(model=lm, tasks=TASKS, task_manager=tm, limit=6, bootstrap_iters=0,
                                   log_samples=True, num_fewshot=0)


def test_per_request_loglikelihoods_equal_lm_evals_hf_backend(world_run, task_dir, tmp_path):
    from evals.harness.adapter import ReproLM
    from evals.harness.hf_reference import export_hf, hf_lm

    ours = ReproLM.from_run(world_run["final"], world_run["tokenizer"], batch_size=4)
    hf_dir = export_hf(ours.model, world_run["tokenizer"], tmp_path / "hf", ours.eot_token_id)
    ref = hf_lm(hf_dir, batch_size=4)
    a, b = _evaluate(ours, task_dir), _evaluate(ref, task_dir)
    worst, n = 0.0, 0
    for task in TASKS:
        sa = sorted(a["samples"][task], key=lambda s: s["doc_id"])
        sb = sorted(b["samples"][task], key=lambda s: s["doc_id"])
        assert len(sa) == len(sb) == 6
        for x, y in zip(sa, sb):
            assert x["arguments"] == y["arguments"]
            for rx, ry in zip(x["resps"], y["resps"]):
                rx, ry = rx[0], ry[0]
                if task == "embedded_gen":
                    assert rx == ry
                    continue
                lx, ly = (rx[0], ry[0]) if isinstance(rx, (tuple, list)) else (rx, ry)
                assert lx == pytest.approx(ly, abs=1e-4, rel=1e-5)
                worst, n = max(worst, abs(lx - ly)), n + 1
                if isinstance(rx, (tuple, list)):
                    assert rx[1] == ry[1]  # is_greedy
    assert n == 6 + 6 * 4 + 6  # cloze, choice (4 endings), ppl
    assert ours.stats["truncated_contexts"] > 0  # the left truncation path was compared too
    for task in TASKS:
        for metric, value in a["results"][task].items():
            if isinstance(value, float) and "stderr" not in metric:
                assert value == pytest.approx(b["results"][task][metric], rel=1e-4), (task, metric)
    print(f"max |delta loglikelihood| over {n} requests: {worst:.2e}")
