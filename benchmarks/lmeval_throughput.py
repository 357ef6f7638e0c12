"""lm-eval request throughput of our adapter against lm-eval's own ``hf`` backend, one run, same weights.

Protocol: the embedded default's shape (GPT-2, d 128, 4 layers, 4 heads, seq 256, a 2,048-token BPE
trained on the synthetic world; random GPT-2 init unless ``--run-dir`` gives a trained run and
``--tokenizer`` its tokenizer); the same model exported to a ``transformers`` folder
(``models.hf_gpt2``) and loaded by ``lm_eval.models.huggingface.HFLM``, fp32, same batch size, same
threads. The requests are those lm-eval builds for the embedded tasks (cloze and 4-way choice:
``loglikelihood``; held-out documents: ``loglikelihood_rolling``). Each round times every request
type on both arms, the arm order alternating between rounds; the first round is a warm-up; the
median over the remaining rounds is reported, in wall time and in process CPU time (the latter is
robust to other jobs on a shared machine). Numbers must be identical: the largest per-request
difference of the log-likelihoods and the number of differing greedy flags are reported.

    python -m benchmarks.lmeval_throughput [--batch-size 16 --rounds 4 --threads 2 --n-items 300]

Writes ``results/benchmarks/lmeval_throughput.json``. Target: ours / hf >= 1.0x.
"""
from __future__ import annotations

import argparse
import sys
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

from benchmarks.common import MachineLoad, environment  # noqa: E402
from common.errors import entry_point  # noqa: E402
from common.io import atomic_write_json, atomic_write_text  # noqa: E402


def build_setup(a, work: Path):
    """(model, tokenizer, tokenizer path, task folder)."""
    from corpora.synthetic import WorldConfig, generate_split
    from corpora.tokenization import EOT, load_tokenizer
    from evals.tasks.embedded import build_embedded_tasks
    from models.registry import build_model

    if a.run_dir:
        from evals.harness.checkpoints import load_for_eval

        model, tok, _ = load_for_eval(Path(a.run_dir) / "final", Path(a.tokenizer))
        tok_path = Path(a.tokenizer)
    else:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        bpe = Tokenizer(models.BPE())
        bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        bpe.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=a.vocab, min_frequency=2, special_tokens=[EOT], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        bpe.train_from_iterator((d["text"] for d in generate_split(WorldConfig(train_docs=a.bpe_docs), "train", 0)),
                                trainer=trainer)
        tok_path = work / "tokenizer.json"
        atomic_write_text(tok_path, bpe.to_str())
        tok = load_tokenizer({"kind": "bpe"}, tok_path)
        torch.manual_seed(0)
        model = build_model({"arch": "gpt2", "d_model": a.d_model, "n_layer": a.layers, "n_head": a.heads},
                            vocab_size=tok.vocab_size, seq_len=a.seq)
    build_embedded_tasks({}, 0, work / "tasks", n_items=a.n_items, n_ppl_docs=a.n_ppl_docs)
    return model.eval(), tok, tok_path, work / "tasks"


def requests_by_type(task_dir: Path) -> dict[str, list]:
    from lm_eval.tasks import TaskManager

    tasks = TaskManager(include_path=str(task_dir), include_defaults=False).load(
        ["embedded_cloze", "embedded_choice", "embedded_ppl"])["tasks"]
    out: dict[str, list] = {}
    for task in tasks.values():
        task.build_all_requests(rank=0, world_size=1)
        for inst in task.instances:
            out.setdefault(inst.request_type, []).append(inst)
    return out


def compare(kind: str, a: list, b: list) -> dict:
    if kind == "loglikelihood":
        diff = max(abs(x[0] - y[0]) for x, y in zip(a, b))
        flags = sum(x[1] != y[1] for x, y in zip(a, b))
    else:
        diff, flags = max(abs(x - y) for x, y in zip(a, b)), 0
    return {"max_abs_diff": diff, "greedy_flag_mismatches": flags}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--rounds", type=int, default=4, help="timed rounds after one warm-up round")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--bpe-docs", type=int, default=3000, help="synthetic training documents for the BPE")
    p.add_argument("--n-items", type=int, default=300)
    p.add_argument("--n-ppl-docs", type=int, default=200)
    p.add_argument("--run-dir", help="a trained run (its final/ checkpoint) instead of a random GPT-2")
    p.add_argument("--tokenizer", help="the run's tokenizer.json (with --run-dir)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="results/benchmarks/lmeval_throughput.json")
    a = p.parse_args(argv)
    if bool(a.run_dir) != bool(a.tokenizer):
        p.error("--run-dir and --tokenizer go together")
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)

    from evals.harness.adapter import ReproLM
    from evals.harness.hf_reference import export_hf, hf_lm

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model, tok, tok_path, task_dir = build_setup(a, work)
        max_length = model.cfg.seq_len
        arms = {"ours": ReproLM(model, tok, max_length=max_length, batch_size=a.batch_size, device=a.device),
                "hf": hf_lm(export_hf(model, tok_path, work / "hf", tok.eot_id), a.batch_size, a.device, max_length)}
        reqs = requests_by_type(task_dir)
        times = {arm: {kind: [] for kind in reqs} for arm in arms}
        cpu = {arm: {kind: [] for kind in reqs} for arm in arms}
        answers = {}
        load = MachineLoad()
        for r in range(a.rounds + 1):
            order = list(arms) if r % 2 == 0 else list(arms)[::-1]
            for arm in order:
                for kind, instances in reqs.items():
                    t0, c0 = time.perf_counter(), time.process_time()
                    answers[arm, kind] = getattr(arms[arm], kind)(instances, disable_tqdm=True)
                    if r > 0:
                        times[arm][kind].append(time.perf_counter() - t0)
                        cpu[arm][kind].append(time.process_time() - c0)

    result = {"benchmark": "lmeval_throughput", "config": vars(a),
              "requests": {kind: len(v) for kind, v in reqs.items()}, "arms": {}}
    for arm, per_kind in times.items():
        med = {kind: statistics.median(ts) for kind, ts in per_kind.items()}
        total = sum(med.values())
        cpu_total = sum(statistics.median(ts) for ts in cpu[arm].values())
        result["arms"][arm] = {"median_s": med, "total_s": total,
                               "requests_per_s": {kind: len(reqs[kind]) / med[kind] for kind in reqs},
                               "total_requests_per_s": sum(len(v) for v in reqs.values()) / total,
                               "rounds_s": per_kind, "cpu_rounds_s": cpu[arm],
                               "total_requests_per_cpu_s": sum(len(v) for v in reqs.values()) / cpu_total}
    ours, hf = result["arms"]["ours"], result["arms"]["hf"]
    result["ratio_ours_over_hf"] = ours["total_requests_per_s"] / hf["total_requests_per_s"]
    result["ratio_by_type"] = {k: ours["requests_per_s"][k] / hf["requests_per_s"][k] for k in reqs}
    # process CPU time: robust to other jobs on a shared machine (wall time is not)
    result["ratio_ours_over_hf_cpu_time"] = ours["total_requests_per_cpu_s"] / hf["total_requests_per_cpu_s"]
    result["identical"] = {kind: compare(kind, answers["ours", kind], answers["hf", kind]) for kind in reqs}
    result["load_avg_1min"] = load.finish()
    result["environment"] = environment(a.threads, torch.device(a.device))
    atomic_write_json(a.out, result)
    for arm, v in result["arms"].items():
        print(f"{arm:5s} " + "  ".join(f"{k} {v['requests_per_s'][k]:7.1f} req/s" for k in reqs)
              + f"  total {v['total_requests_per_s']:7.1f} req/s")
    print("identical: " + ", ".join(f"{k} max|d| {v['max_abs_diff']:.1e}, greedy mismatches "
                                     f"{v['greedy_flag_mismatches']}" for k, v in result["identical"].items()))
    print(f"ours / hf = {result['ratio_ours_over_hf']:.2f}x wall time, "
          f"{result['ratio_ours_over_hf_cpu_time']:.2f}x CPU time"
          + (f"; {result['load_avg_1min']['why']}" if result["load_avg_1min"]["loaded"] else "") + f"  -> {a.out}")
    return result


if __name__ == "__main__":
    sys.exit(entry_point(main)())
