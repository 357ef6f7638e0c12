"""Gen. PPL of generated samples under judge LMs (the MDLM/DUO protocol, ``protocol``), their
unigram entropy, their ground-truth quality under the synthetic world's grammar (``world``), and the
export of a trained GPT-2 run as an offline ``transformers`` judge (``export``).

Command line (``python -m workflows.cli`` subcommands, ``command``)::

    python -m workflows.cli export-judge --run-dir results/runs/judge_gpt2/seed0 \\
        --tokenizer results/data/world/tokenizer.json --out results/judges/world_gpt2
    python -m workflows.cli score-samples --samples S.jsonl --judge results/judges/world_gpt2 [--judge gpt2-large] \\
        --model-tokenizer results/data/world/tokenizer.json --run-dir results/runs/ncm_s/seed0 \\
        [--world-settings settings.json] --out results/runs/ncm_s/seed0/eval/genppl.json

Python: ``score_samples`` (what the CLI runs), ``gen_ppl``, ``world_quality``, ``export_judge``,
``load_judge``, ``load_model_tokenizer``, ``read_samples``, ``Protocol``.
"""
from evals.genppl.protocol import (EOT, GenPPLError, Judge, ModelTokenizer, Protocol, Samples, encodability, eos_mask,
                                   gen_ppl, judge_nll, load_judge, load_model_tokenizer, mean_entropy, read_samples,
                                   unigram_entropy)
from evals.genppl.score import score_samples
from evals.genppl.world import world_config, world_quality


def export_judge(*args, **kwargs):
    """See ``evals.genppl.export.export_judge``."""
    from evals.genppl.export import export_judge as _export

    return _export(*args, **kwargs)


__all__ = ["EOT", "GenPPLError", "Judge", "ModelTokenizer", "Protocol", "Samples", "encodability", "eos_mask",
           "export_judge", "gen_ppl", "judge_nll", "load_judge", "load_model_tokenizer", "mean_entropy",
           "read_samples", "score_samples", "unigram_entropy", "world_config", "world_quality"]
