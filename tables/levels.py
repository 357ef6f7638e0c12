"""The bench itself: the synthetic world's entropy by level (``corpora.synthetic.levels``), as a table.

The world's exact NLL per token splits into its *plan* (which unit comes next: document type, predicate,
which entity is mentioned) and the *surface* that realises it; the plan's reach is the entropy of the next
unit given its last k units (held-out n-grams over the units) against the exact entropy given the whole
past. Read with the mechanism checks: it says what a concept model could find in this world.
"""
from __future__ import annotations

import json
from pathlib import Path

from common.errors import ReproError

from .grid import markdown_grid

HEADER = ["quantity", "value", "unit"]


def load_levels(path: Path) -> dict:
    """The data stage's ``levels.json``, or a one-line error naming the fix."""
    try:
        data = json.loads(Path(path).read_text())
        data["nats_per_token"], data["units"]  # noqa: B018 -- the keys the table reads
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise ReproError(f"--levels {path}: unreadable ({error}); delete it and re-run snakemake") from None
    return data


def levels_rows(data: dict) -> list[list[str]]:
    """Rows of ``HEADER``: the split per token, the units, then H(next unit | last k units) for every k."""
    nats, units = data["nats_per_token"], data["units"]
    rows = [["exact NLL (the oracle)", f"{nats['total']:.3f}", "nats / token"],
            ["plan: which unit comes next", f"{nats['plan']:.3f}", "nats / token"],
            ["surface: its words", f"{nats['surface']:.3f}", "nats / token"],
            ["plan units", f"{units['per_token']:.3f}", "units / token"],
            ["H(next unit | whole past), exact", f"{units['exact_nats_per_unit']:.2f}", "nats / unit"]]
    rows += [[f"H(next unit | last {k} units), n-gram", f"{value:.2f}", "nats / unit"]
             for k, value in sorted(units["ngram_nats_per_unit"].items(), key=lambda item: int(item[0]))]
    if nats.get("topic_information"):
        rows.append(["latent topic revealed by the text", f"{nats['topic_information']:.3f}", "nats / token"])
    rows.append(["documents longer than the window", f"{100 * data['documents_longer_than_window']:.0f} %",
                 f"of {data['documents']} {data['split']} documents, window {data['window']}"])
    return rows


def levels_caption(data: dict) -> str:
    """One sentence on what the table says: the plan's share and how much of it lies beyond two units."""
    nats, units = data["nats_per_token"], data["units"]
    two = units["ngram_nats_per_unit"].get("2")
    beyond = "" if two is None else (
        f"; the last two units leave {two - units['exact_nats_per_unit']:.2f} nats per unit "
        f"({(two - units['exact_nats_per_unit']) * units['per_token']:.3f} nats per token) to the rest of the past")
    return (f"The world's {nats['total']:.3f} nats per token: {nats['plan']:.3f} plan, {nats['surface']:.3f} "
            f"surface{beyond} (corpora/synthetic/README.md, entropy by level).")


def levels_markdown(data: dict) -> str:
    lines = ["# The bench: the synthetic world's entropy by level", "", levels_caption(data), "",
             markdown_grid(HEADER, levels_rows(data))]  # escapes the "|" of H(next unit | ...)
    return "\n".join(lines) + "\n"
