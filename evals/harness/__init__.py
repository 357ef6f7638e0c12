"""lm-evaluation-harness integration: one adapter for every model family, task suites as config.

* ``adapter.ReproLM`` (registered in lm-eval as ``concept-repro``): the ``LM`` subclass;
* ``checkpoints``: load a run's checkpoint and tokenizer, refusing what does not fit;
* ``suites``: ``evals/tasks/suites.yaml`` resolved into a run plan;
* ``run.evaluate`` (``python -m workflows.cli eval-<name>`` / ``lm-eval``, ``command``): evaluate a run, write its
  result JSON and sample log.

Task data lives in ``evals/tasks`` (embedded tasks from the synthetic world, local-file mode for
real tasks). Importing this package is cheap; ``lm_eval`` is imported by ``adapter`` and ``run``.
"""
