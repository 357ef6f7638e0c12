"""Evaluation tasks as data: suites (``suites.yaml``), embedded tasks generated from the synthetic
world (``embedded.py``, templates in ``embedded/``), local-file variants of real tasks
(``local_data.py``, ``local_data.yaml``). See ``README.md``."""
