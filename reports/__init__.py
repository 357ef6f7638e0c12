"""The human-facing report: tables, audit and figures of one run, as Markdown and a self-contained HTML page.

Reads what ``python -m tables build`` wrote and the result files under
``results/runs``; imports ``tables`` and nothing from models, evals, corpora
or the trainer.
"""
