"""Every paper table as data: reported numbers, declarative specs, arithmetic audit, reproduced results.

``tables/reported/`` holds the papers'
printed numbers, ``tables/specs/`` describes each table, and ``python -m tables
build`` recomputes every printed aggregate and arithmetic claim, merges the
reproduced results and renders Markdown, CSV, LaTeX and an audit page.  This
package reads result files only; it imports no model, eval or trainer code (only the table of
evaluation names, ``evals/registry.py``). ``tables.load(results)`` returns the built tables as pandas
DataFrames (``tables/frames.py``).
"""

from .frames import load  # noqa: E402,F401  (the researchers' entry point)
