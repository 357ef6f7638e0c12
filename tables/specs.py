"""Declarative table specs: ``tables/specs/<paper>/<table>.yaml``.

A spec lists a paper table's rows and columns, the formula by which the paper
computes each aggregate, and the (experiment, eval, metric key) that reproduces
each cell.  A new table is a new spec file; files named ``_*.yaml`` hold rows or
columns shared by several specs and are pulled in with ``{include: _name.yaml}``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evals.registry import find, forms

from .validation import DataError, load_yaml, schema

SPECS = Path(__file__).resolve().parent / "specs"


@dataclass(frozen=True)
class Axis:
    """One row or column of a table."""

    id: str
    label: str
    group: str = ""
    baseline: bool = False
    type: str | None = None
    result: dict = field(default_factory=dict)
    formula: str | None = None
    alternatives: dict = field(default_factory=dict)
    order_proxy: str | None = None
    note: str = ""
    corpus: str | None = None      # what the paper trained this row / column on (the table's when absent)
    synthetic_only: bool = False   # columns: a quantity of the synthetic world alone (the oracle, its tasks)
    # columns: better is closer to this number, or to the row of this label in the group
    closer_to: float | str | None = None
    fixed: bool = False            # columns: fixed by the design (NFE, parameter counts): shown, never judged
    range: dict = field(default_factory=dict)  # columns: {min, max (a number or a metric key of the cell's eval), why}


NO_CORPUS = "none"  # a quantity that depends on no corpus (kernel timings)


def _listed(experiments) -> tuple[str, ...]:
    """The experiment ids of a result reference: one id or a list of them."""
    return (experiments,) if isinstance(experiments, str) else tuple(experiments or ())


@dataclass(frozen=True)
class CellCheck:
    """A formula attached to one cell, for arithmetic that is neither a row nor a column rule."""

    row: str
    column: str
    formula: str
    alternatives: dict = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True)
class ResultRef:
    """Where a reproduced cell comes from: ``results/runs/{experiment}/seed*/eval/{eval}.json`` -> ``metrics[key]``.

    Several experiments may be named (e.g. the full-scale id and the embedded one); the first with results is used.
    """

    experiments: tuple[str, ...]
    eval: str
    key: str
    scale: float = 1.0

    @property
    def metrics(self) -> list[tuple[str, str, str]]:
        """(experiment, eval, key) of each candidate: how results are indexed."""
        return [(experiment, self.eval, self.key) for experiment in self.experiments]


@dataclass
class TableSpec:
    """One paper table: its layout, aggregates and reproduction mapping."""

    paper: str
    table: str
    title: str
    where: str
    path: Path
    rows: list[Axis]
    columns: list[Axis]
    checks: list[CellCheck] = field(default_factory=list)
    caption: str = ""
    kind: str = "results"
    value_type: str = "number"
    order: int = 100
    corpus: str | None = None
    caption_synthetic: str = ""

    def __post_init__(self):
        self.row_by_id = _index(self.rows, self.path, "rows")
        self.listed_by_corpus: dict[str, set[str]] = {}  # a corpus of the rows -> the experiments its rows list
        for axis in self.rows:
            if axis.corpus:
                self.listed_by_corpus.setdefault(axis.corpus, set()).update(_listed(axis.result.get("experiment")))
        self.column_by_id = _index(self.columns, self.path, "columns")
        for check in self.checks:
            if check.row not in self.row_by_id or check.column not in self.column_by_id:
                raise DataError(self.path, None, "checks", f"unknown cell ({check.row}, {check.column})")
        for field_name, axes in (("rows", self.rows), ("columns", self.columns)):
            for axis in axes:
                name = axis.result.get("eval")
                if name is not None and find(name) is None:
                    raise DataError(self.path, None, f"{field_name}.{axis.id}.result.eval",
                                    f"'{name}' is not an evaluation of evals/registry.py; use one of: {forms()}")
        for column in self.columns:
            if column.order_proxy is not None and column.order_proxy not in self.column_by_id:
                raise DataError(self.path, None, f"columns.{column.id}.order_proxy",
                                f"{column.order_proxy!r} is not a column of this table")

    def cell_type(self, row: str, column: str) -> str:
        """'number' or 'text': the row's type wins over the column's, then the table default."""
        return self.row_by_id[row].type or self.column_by_id[column].type or self.value_type

    def paper_corpus(self, row: str, column: str) -> str | None:
        """What the paper trained the cell's model on: the row's corpus, else the column's, else the table's."""
        return self.row_by_id[row].corpus or self.column_by_id[column].corpus or self.corpus

    def admits(self, row: str, column: str, corpora, experiment: str) -> bool:
        """Whether ``experiment``, trained on ``corpora``, may fill the cell. A table with rows per corpus (NCM
        Table 8: TinyStories, LM1B, OpenWebText) keeps a run on one of its corpora to that corpus's rows when a
        row of that corpus lists the run; otherwise (no row of its own, or another corpus altogether: the
        synthetic world, a local set) the run fills the rows that list it, as an analogue."""
        own = set(corpora) & self.listed_by_corpus.keys()
        if not own or own == {self.paper_corpus(row, column)}:
            return True
        return not any(experiment in self.listed_by_corpus[corpus] for corpus in own)

    def baseline_of(self, row: str) -> Axis | None:
        """The baseline row of ``row``'s group, if the group declares one."""
        group = self.row_by_id[row].group
        return next((axis for axis in self.rows if axis.baseline and axis.group == group), None)

    def result_ref(self, row: str, column: str) -> ResultRef | None:
        """The column's result reference updated with the row's; None unless complete."""
        merged = {**self.column_by_id[column].result, **self.row_by_id[row].result}
        if not {"experiment", "eval", "key"} <= merged.keys():
            return None
        key = merged["key"].replace("{row}", row).replace("{column}", column)
        return ResultRef(_listed(merged["experiment"]), merged["eval"], key, merged.get("scale", 1.0))


def _index(axes: list[Axis], path: Path, field_name: str) -> dict[str, Axis]:
    index: dict[str, Axis] = {}
    for position, axis in enumerate(axes):
        if axis.id in index:
            raise DataError(path, None, f"{field_name}.{position}.id", f"duplicate id '{axis.id}'")
        index[axis.id] = axis
    return index


def _axes(items: list[dict], spec_path: Path) -> list[Axis]:
    """Expand ``include`` entries, then build the axes."""
    axes: list[Axis] = []
    fragment_schema = {"$defs": schema("spec.schema.json")["$defs"], "type": "array",
                       "minItems": 1, "items": {"$ref": "#/$defs/axis"}}
    for item in items:
        if "include" in item:
            axes += [Axis(**entry) for entry in load_yaml(spec_path.parent / item["include"], fragment_schema)]
        else:
            axes.append(Axis(**item))
    return axes


def load_spec(path: Path) -> TableSpec:
    """Load and validate one spec; its paper and table must match folder and file name."""
    data = load_yaml(path, schema("spec.schema.json"))
    if data["paper"] != path.parent.name:
        raise DataError(path, None, "paper", f"'{data['paper']}' differs from folder '{path.parent.name}'")
    if data["table"] != path.stem:
        raise DataError(path, None, "table", f"'{data['table']}' differs from file name '{path.stem}'")
    return TableSpec(
        paper=data["paper"], table=data["table"], title=data["title"], where=data["where"], path=path,
        rows=_axes(data["rows"], path), columns=_axes(data["columns"], path),
        checks=[CellCheck(**check) for check in data.get("checks", [])],
        caption=data.get("caption", ""), kind=data.get("kind", "results"),
        value_type=data.get("value_type", "number"), order=data.get("order", 100), corpus=data.get("corpus"),
        caption_synthetic=data.get("caption_synthetic", ""))


def load_specs(root: Path = SPECS) -> dict[str, dict[str, TableSpec]]:
    """All specs under ``root``: paper -> table -> spec, each paper's tables in report order."""
    papers: dict[str, dict[str, TableSpec]] = {}
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        specs = [load_spec(path) for path in sorted(folder.glob("*.yaml")) if not path.name.startswith("_")]
        papers[folder.name] = {spec.table: spec for spec in sorted(specs, key=lambda s: (s.order, s.table))}
    return papers
