"""The papers' written claims judged on our runs, one by one.

Each claim of ``reported/<paper>/claims.yaml`` carries a formula over the paper's cells.  The formula
says what the claim asserts, and the same formula is evaluated on our reproduced cells:

- an **ordering** claim is a comparison (``a < b``; ``a >= max(b, c)`` reads as a >= b and a >= c;
  parts joined by ``and``), or a printed difference (``a - b`` printed 0.7: a above b).  A **tie**
  (``a == b``, NCM's "NCM + MBR ties the AR model") is a part with no sign: a significant difference
  contradicts it; otherwise it is inconclusive with the MDE -- no paper prints the margin an equivalence
  test would need, so a tie is never reproduced.  Two cells one run fills alike (the paper's default row
  printed in several tables) are equal by construction here: fixed by the design, not judged.  Each part's
  difference is tested by the rule of ``tables/stats.py`` (paired on matched seeds and data order, Welch
  otherwise) and the parts of one claim form one Holm-Bonferroni family;
- a cell we do not have whose column names an ``order_proxy`` (the paper's Avg PPL) is read through
  that column of ours (our test PPL on the training distribution); the verdict then says "proxy" and
  names the substitution;
- a **value** claim is any other printed number (a ratio, a relative gain): our value gets a 95 %
  interval; at the paper's scale it is reproduced when the printed value lies inside the interval and
  contradicted otherwise; at reduced scale a value is shown and not judged (another scale is another
  quantity).

A claim is *reproduced* when every part run here is significant with the paper's sign, *contradicted*
when a part is significant with the opposite sign (a tie: significant at all), *mechanism not exercised* when a
part involves an
arm whose concept mechanism failed its check (``tables/mechanisms.py``), *inconclusive* otherwise (with
the smallest difference the design could see beside the paper's effect), and *not run here* when no
run of this profile fills its cells.  Claims that cite no cell (the paper's own arithmetic on
constants) are not claims about runs and are left out.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

from scipy import stats

from .checks import Check, cell_label
from .grid import markdown_grid
from .expressions import Expression, Ref
from .mechanisms import Mechanism, unexercised
from .numbers import Printed, format_float
from .ordering import Estimate, from_seeds, inconclusive_reason, test_pair
from .reported import Paper
from .results import common_orders
from .specs import ResultRef, TableSpec
from .stats import ALPHA, Test, compare, holm

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_EXERCISED, OUT_OF_RANGE, NOT_RUN, NOT_JUDGED, FIXED = (
    "reproduced", "contradicted", "inconclusive", "mechanism not exercised", "out of range", "not run here",
    "value shown, not judged", "fixed by the design")
RESULTS_MISSING = "results missing (re-run snakemake)"  # this profile runs it and has no result: a record's verdict
VERDICTS = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_EXERCISED, OUT_OF_RANGE, RESULTS_MISSING, NOT_RUN, NOT_JUDGED)
_SIGNS = {ast.Gt: 1, ast.GtE: 1, ast.Lt: -1, ast.LtE: -1, ast.Eq: 0}  # 0: a tie
CLAIMED = {1: "above", -1: "below", 0: "equal"}


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its expression, the paper's value and ours."""

    text: str
    paper: float | None
    ours: Estimate | None
    missing: tuple[Ref, ...]          # cells no run of this profile fills
    experiments: tuple[str, ...] = ()
    proxies: tuple[str, ...] = ()     # "Avg PPL through Train dist. PPL": cells read from the column's order_proxy
    flags: tuple[str, ...] = ()       # cells outside their column's meaningful range (a Gen. PPL above uniform)
    fixed: tuple[str, ...] = ()       # columns fixed by the design (NFE): shown, never judged


@dataclass(frozen=True)
class Part:
    """left - right, claimed positive (sign +1), negative (sign -1) or zero (sign 0, a tie)."""

    left: Side
    right: Side
    sign: int
    test: Test | None = None
    p_adjusted: float | None = None
    family: int = 1
    idle: str = ""                   # why a side's mechanism was not exercised

    @property
    def paper_effect(self) -> float | None:
        if self.left.paper is None or self.right.paper is None:
            return None
        return self.left.paper - self.right.paper

    @property
    def d(self) -> float | None:
        return self.left.ours.mean - self.right.ours.mean if self.left.ours and self.right.ours else None

    @property
    def missing(self) -> tuple[Ref, ...]:
        return self.left.missing + self.right.missing

    @property
    def mde(self) -> float | None:
        return self.test.mde(self.family) if self.test else None

    @property
    def outcome(self) -> str:
        if self.missing:
            return NOT_RUN
        if self.left.fixed or self.right.fixed or self.one_run:
            return FIXED
        if self.flags:
            return OUT_OF_RANGE
        if self.idle:
            return NOT_EXERCISED
        if self.test is None or self.p_adjusted is None or self.p_adjusted >= ALPHA:
            return INCONCLUSIVE
        return REPRODUCED if self.d * self.sign > 0 else CONTRADICTED

    @property
    def one_run(self) -> bool:
        return self.sign == 0 and _one_run(self.left, self.right)

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.left.flags + self.right.flags))

    @property
    def reason(self) -> str:
        outcome = self.outcome
        if outcome == FIXED and self.one_run:
            return "one run fills both cells: equal by construction"
        if outcome == FIXED:
            return f"{', '.join(dict.fromkeys(self.left.fixed + self.right.fixed))}: fixed by the design"
        if outcome == OUT_OF_RANGE:
            return "; ".join(self.flags)
        if outcome == NOT_EXERCISED:
            return self.idle
        if outcome == INCONCLUSIVE and self.sign == 0 and self.test is not None:
            return (inconclusive_reason(self.test, self.p_adjusted, self.family)
                    + "; a tie: no equivalence margin is printed, so it can be contradicted, not reproduced")
        if outcome == CONTRADICTED and self.sign == 0:
            return "a tie, and the difference is significant"
        return inconclusive_reason(self.test, self.p_adjusted, self.family) if outcome == INCONCLUSIVE else ""


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim of a paper with our verdict."""

    paper: str
    id: str
    where: str
    text: str
    kind: str                               # ordering | value
    parts: tuple[Part, ...] = ()
    value: Side | None = None               # a value claim: the formula on the paper's cells and on ours
    printed: float | None = None
    scale: str = "reduced"
    idle: str = ""                          # a value claim: why an arm's mechanism was not exercised
    printed_number: Printed | None = field(default=None, compare=False)  # the printed value with its precision
    not_run_refs: tuple[ResultRef, ...] = field(default=(), compare=False)  # what would fill the missing cells

    @property
    def verdict(self) -> str:
        if self.kind == "value":
            return self._value_verdict()
        outcomes = [part.outcome for part in self.parts if part.outcome != FIXED]
        run = [outcome for outcome in outcomes if outcome != NOT_RUN]
        if not outcomes:
            return NOT_JUDGED  # every part compares quantities fixed by the design
        if not run:
            return NOT_RUN
        for verdict in (CONTRADICTED, NOT_EXERCISED, OUT_OF_RANGE):
            if verdict in run:
                return verdict
        return REPRODUCED if all(outcome == REPRODUCED for outcome in run) else INCONCLUSIVE

    def _value_verdict(self) -> str:
        if self.value is not None and self.value.flags:
            return OUT_OF_RANGE
        if self.value is None or self.value.missing or self.value.ours is None:
            return NOT_RUN
        if self.idle:
            return NOT_EXERCISED
        if self.scale != "paper" or self.printed is None:  # another scale; or a comparison of a form not split
            return NOT_JUDGED
        low, high = self.interval or (None, None)
        if low is None:
            return INCONCLUSIVE
        return REPRODUCED if self._covers(low, high) else CONTRADICTED

    def _covers(self, low: float, high: float) -> bool:
        """Our 95 % interval meets the printed value, read as printed: within its rounding (half a unit in the
        last place, twice that for '~'), or on the stated side of a bound ('<', '>')."""
        number = self.printed_number
        slack = number.half_unit * (2 if number.qualifier in ("~", "≈") else 1) if number else 0.0
        if number is not None and number.qualifier == "<":
            return low < self.printed
        if number is not None and number.qualifier == ">":
            return high > self.printed
        return low - slack <= self.printed <= high + slack

    @property
    def interval(self) -> tuple[float, float] | None:
        """A value claim's 95 % interval of our mean over seeds (None with one seed)."""
        ours = self.value.ours if self.value else None
        if ours is None or ours.n < 2 or ours.std is None:
            return None
        half = float(stats.t.ppf(1 - ALPHA / 2, ours.n - 1)) * ours.std / ours.n ** 0.5
        return ours.mean - half, ours.mean + half

    @property
    def proxies(self) -> list[str]:
        """The paper's columns read through another column of ours (a proxy): the verdict is about the proxy."""
        sides = [self.value] if self.value else [side for part in self.parts for side in (part.left, part.right)]
        return list(dict.fromkeys(p for side in sides for p in side.proxies))

    @property
    def paper_against(self) -> str:
        """The parts the paper's own printed cells order against the claim (the claim fails in its own table)."""
        against = [k + 1 for k, part in enumerate(self.parts)
                   if part.paper_effect is not None and (part.paper_effect * part.sign < 0 or part.sign == 0
                                                         and not math.isclose(part.left.paper, part.right.paper,
                                                                              rel_tol=1e-9, abs_tol=1e-12))]
        return (f"the paper's own cells go against part{'s' * (len(against) > 1)} {', '.join(map(str, against))} "
                f"of {len(self.parts)}") if against else ""

    @property
    def partial(self) -> str:
        """"2 of 4 parts run here" when some parts are not run; empty otherwise."""
        run = sum(part.outcome != NOT_RUN for part in self.parts)
        return f"{run} of {len(self.parts)} parts run here" if self.parts and 0 < run < len(self.parts) else ""

    @property
    def reason(self) -> str:
        """Why the verdict: the parts that decide it, or what a value claim compares."""
        verdict = self.verdict
        if self.kind == "value":
            if verdict == OUT_OF_RANGE:
                return "; ".join(self.value.flags)
            if verdict == NOT_JUDGED and self.printed is None:
                return "a comparison of a form the rule does not split into parts (or, !=)"
            if verdict == NOT_JUDGED:
                return f"the paper's {self.printed:g} against ours {self.value.ours.mean:.4g} at reduced scale"
            return self.idle if verdict == NOT_EXERCISED else ""
        decisive = FIXED if verdict == NOT_JUDGED else verdict  # every part fixed: their reasons
        chosen = [part.reason for part in self.parts if part.outcome == decisive and part.reason]
        return "; ".join(dict.fromkeys(atom for reason in chosen for atom in reason.split("; ")))  # each said once


def _split(node: ast.AST, printed: float | None) -> list[tuple[ast.AST, ast.AST, int]] | None:
    """The (left, right, sign) parts of an ordering formula; None for a value claim."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        parts = [_split(value, None) for value in node.values]
        return None if any(part is None for part in parts) else [p for part in parts for p in part]
    if isinstance(node, ast.Compare) and len(node.ops) > 1 and all(type(op) in _SIGNS for op in node.ops):
        chain = [node.left, *node.comparators]  # a < b < c: a < b and b < c
        return [(chain[k], chain[k + 1], _SIGNS[type(op)]) for k, op in enumerate(node.ops)]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _SIGNS:
        left, right, sign = node.left, node.comparators[0], _SIGNS[type(node.ops[0])]
        if sign and _is_call(right, "max" if sign > 0 else "min"):  # a >= max(b, c): a >= b and a >= c
            return [(left, arg, sign) for arg in right.args]
        if sign and _is_call(left, "min" if sign > 0 else "max"):   # min(a, b) > c: a > c and b > c
            return [(arg, right, sign) for arg in left.args]
        return [(left, right, sign)]
    # a difference of cells (printed 0: a tie); 100 - x is a value
    if (printed is not None and isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)
            and _cites(node.left) and _cites(node.right)):
        return [(node.left, node.right, (printed > 0) - (printed < 0))]
    return None


def _test(left: Side, right: Side) -> Test | None:
    """The test of left - right; against a constant side (no cell), a one-sample test of ours against it."""
    constant = [side for side in (left, right) if side.ours.n == 0]
    if not constant:
        return test_pair(left.ours, right.ours)
    if len(constant) == 2 or left.ours.per_seed is None and right.ours.per_seed is None:
        return None
    ours, fixed = (left, right) if right in constant else (right, left)
    values = ours.ours.values() or {}
    against = {seed: fixed.ours.mean for seed in values}
    return compare(values, against, same_order=True) if ours is left else compare(against, values, same_order=True)


def _one_run(left: Side, right: Side) -> bool:
    """Two sides one run fills with the same numbers (to float rounding): a tie of them is equal by
    construction, not a finding, and is neither tested nor counted in the claim's Holm family."""
    if not left.experiments or left.experiments != right.experiments or left.ours is None or right.ours is None:
        return False
    a, b = left.ours.per_seed or {}, right.ours.per_seed or {}
    return bool(a) and a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-12) for k in a)


def _cites(node: ast.AST) -> bool:
    return any(_is_call(sub, "cell", 2) for sub in ast.walk(node))


def _is_call(node: ast.AST, name: str, least: int = 2) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", "") == name and len(node.args) >= least


class ClaimJudge:
    """Judges the claims of one paper: ``reproduce(ref)`` gives (mapped, Reproduced | None) of a cell;
    ``refs_of(ref)`` the result references that would fill it."""

    def __init__(self, specs: dict[str, TableSpec], paper: Paper, reproduce, refs_of, resolver,
                 mechanisms: dict[str, Mechanism], scale: str, flag_of=lambda ref, reproduced: ""):
        self.specs, self.paper, self.reproduce, self.refs_of = specs, paper, reproduce, refs_of
        self.flag_of = flag_of  # why a cell's value lies outside its column's meaningful range ("" when it does not)
        self.resolver, self.mechanisms, self.scale = resolver, mechanisms, scale
        self.numbers = {ref: printed.value for ref, printed in paper.numbers().items()}

    def side(self, node: ast.AST, through_proxy: bool = False) -> Side:
        """One side on the paper's cells and on ours. ``through_proxy``: every cell whose column names an
        ``order_proxy`` is read through it (a part compares like with like: all through the proxy, or none).
        A side that cites no cell is a constant, the same for the paper and for every seed of ours."""
        expression = Expression(ast.unparse(node), self.resolver)
        refs = expression.refs
        if not refs:
            value = float(expression.evaluate({}))
            return Side(self.words(node), value, Estimate(value, 0.0, 0, None, None), ())
        paper = float(expression.evaluate(self.numbers)) if all(r in self.numbers for r in refs) else None
        paper = paper if paper is None or math.isfinite(paper) else None
        found, proxies, fixed = {}, [], []
        for ref in refs:
            columns = self.specs[ref[0]].column_by_id
            proxy = columns[ref[2]].order_proxy
            if through_proxy and proxy:
                found[ref] = self.reproduce((ref[0], ref[1], proxy))[1]
                proxies.append(f"{columns[ref[2]].label} through {columns[proxy].label}")
            else:
                found[ref] = self.reproduce(ref)[1]
            if columns[ref[2]].fixed:
                fixed.append(columns[ref[2]].label)
        missing = tuple(ref for ref, reproduced in found.items() if reproduced is None)
        failed = tuple(dict.fromkeys(flag for ref in missing if (flag := self.flag_of(ref, None))))
        if failed:  # every seed of a cell diverged (NaN): said, not "not run"
            return Side(self.words(node), paper, None, (), flags=failed)
        if missing:
            return Side(self.words(node), paper, None, missing, fixed=tuple(dict.fromkeys(fixed)))
        seeds = sorted(set.intersection(*(set(r.per_seed) for r in found.values())))
        if not seeds:
            return Side(self.words(node), paper, None, tuple(refs))
        per_seed = {seed: float(expression.evaluate({ref: r.per_seed[seed] for ref, r in found.items()}))
                    for seed in seeds}
        if not all(math.isfinite(value) for value in per_seed.values()):  # our values make it undefined (x / 0)
            return Side(self.words(node), paper, None, (), flags=("our values make the formula undefined",))
        orders = common_orders(seeds, found.values())
        experiments = tuple(dict.fromkeys(e for r in found.values() for e in r.experiments))
        flags = tuple(dict.fromkeys(flag for ref, r in found.items() if (flag := self.flag_of(ref, r))))
        return Side(self.words(node), paper, from_seeds(per_seed, orders), (), experiments,
                    tuple(dict.fromkeys(proxies)), flags, tuple(dict.fromkeys(fixed)))

    def sides(self, *nodes: ast.AST) -> list[Side]:
        """The sides of one part (or a value claim's one side) read alike: directly when every cell has a value
        of ours, otherwise all through their columns' proxies when that fills every cell."""
        direct = [self.side(node) for node in nodes]
        if not any(side.missing for side in direct):
            return direct
        proxied = [self.side(node, through_proxy=True) for node in nodes]
        return proxied if not any(side.missing for side in proxied) and any(s.proxies for s in proxied) else direct

    def _idle(self, sides: list[Side]) -> str:
        """Why a part is not judged: an arm's mechanism not exercised, a cell out of its range."""
        experiments = tuple(e for side in sides for e in side.experiments)
        return "; ".join(filter(None, [unexercised(self.mechanisms, experiments),
                                       *(f for s in sides for f in s.flags)]))

    def judge(self, check: Check, claim_id: str) -> ClaimVerdict | None:
        if not check.formula.refs:
            return None  # the paper's arithmetic on constants: not a claim about runs
        printed = check.printed.value if check.printed else None
        tree = ast.parse(check.formula.text, mode="eval").body
        split = _split(tree, printed)
        common = dict(paper=self.paper.paper, id=claim_id, where=check.where, text=check.text, scale=self.scale,
                      printed_number=check.printed)
        if split is None:
            (value,) = self.sides(tree)
            return ClaimVerdict(kind="value", value=value, printed=printed, idle=self._idle([value]),
                                not_run_refs=self._refs(value.missing), **common)
        drafts = []
        for left_node, right_node, sign in split:
            left, right = self.sides(left_node, right_node)
            idle = "" if left.fixed or right.fixed else self._idle([left, right])
            judged = (left.ours and right.ours and not idle and not (left.fixed or right.fixed)
                      and not (sign == 0 and _one_run(left, right)))
            drafts.append((left, right, sign, _test(left, right) if judged else None, idle))
        tested = [k for k, draft in enumerate(drafts) if draft[3] is not None]
        adjusted = dict(zip(tested, holm([drafts[k][3].p for k in tested])))
        parts = tuple(Part(left, right, sign, test, adjusted.get(k), max(1, len(tested)), idle)
                      for k, (left, right, sign, test, idle) in enumerate(drafts))
        missing = tuple(ref for part in parts for ref in part.missing)
        return ClaimVerdict(kind="ordering", parts=parts, printed=printed, not_run_refs=self._refs(missing), **common)

    def _refs(self, missing: tuple[Ref, ...]) -> tuple[ResultRef, ...]:
        return tuple(dict.fromkeys(result for ref in missing for result in self.refs_of(ref)))

    def words(self, node: ast.AST) -> str:
        """The expression with every cell named as the tables name it ("Table 1 · Base (GPT-2 355M) · Avg PPL")."""
        resolver, specs = self.resolver, self.specs

        class Named(ast.NodeTransformer):
            def visit_Call(self, call):
                if getattr(call.func, "id", "") == "cell":
                    return ast.Name(id=cell_label(specs, resolver(call)))
                return self.generic_visit(call)

        return ast.unparse(Named().visit(ast.parse(ast.unparse(node), mode="eval").body))


def claim_id(check: Check) -> str:
    """The claim's id, the last part of its origin ("tables/reported/x/claims.yaml: <id>")."""
    return check.origin.rsplit(": ", 1)[-1]


def _number(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")


def part_record(part: Part) -> dict:
    """A part as data: what the paper says (its effect), ours with a 95 % interval, the test."""
    low, high = part.test.interval() if part.test else (None, None)
    return {"left": part.left.text, "right": part.right.text, "claimed": CLAIMED[part.sign],
            "paper_effect": _number(part.paper_effect), "d": _number(part.d), "ci_low": _number(low),
            "ci_high": _number(high), "test": part.test.kind if part.test else "",
            "p_adjusted": _number(part.p_adjusted), "mde": _number(part.mde), "family": part.family,
            "n": [side.ours.n if side.ours else 0 for side in (part.left, part.right)],
            "outcome": part.outcome, "reason": part.reason}


def claim_record(claim: ClaimVerdict, where_run: str = "") -> dict:
    """A claim as data (the report's first screen and ``<paper>/claims.json``); ``where_run`` names the
    profiles that run what this one does not."""
    verdict = claim.verdict
    if verdict == NOT_RUN and where_run.startswith("this profile runs it but its results are missing"):
        verdict = RESULTS_MISSING
    record = {"paper": claim.paper, "id": claim.id, "where": claim.where, "text": claim.text, "kind": claim.kind,
              "verdict": verdict, "shown": ("proxy: " if claim.proxies and verdict not in (NOT_RUN, RESULTS_MISSING)
                                            else "") + verdict,
              "reason": claim.reason, "partial": claim.partial, "proxies": claim.proxies,
              "paper_against": claim.paper_against,
              "not_run": where_run if verdict == NOT_RUN or claim.partial else "",
              "parts": [part_record(part) for part in claim.parts]}
    if claim.kind == "value":
        interval = claim.interval
        record["value"] = {"formula": claim.value.text if claim.value else "", "printed": claim.printed,
                           "paper": _number(claim.value.paper) if claim.value else None,
                           "ours": _number(claim.value.ours.mean) if claim.value and claim.value.ours
                           and claim.printed is not None else None,  # a comparison's truth value is no number
                           "n": claim.value.ours.n if claim.value and claim.value.ours else 0,
                           "ci_low": _number(interval[0]) if interval else None,
                           "ci_high": _number(interval[1]) if interval else None}
    return record


HEADER = ["Claim", "Where", "Paper's effect", "Ours [95 % CI]", "Verdict", "Why"]


def _ours(record: dict) -> str:
    if record["kind"] == "value":
        value = record["value"]
        if value["ours"] is None:
            return "—"
        interval = (f" [{format_float(value['ci_low'])}, {format_float(value['ci_high'])}]"
                    if value["ci_low"] is not None else f" (n={value['n']})")
        return format_float(value["ours"]) + interval
    shown = []
    for part in record["parts"]:
        if part["d"] is None:
            continue
        interval = (f" [{format_float(part['ci_low'])}, {format_float(part['ci_high'])}]" if part["test"]
                    else f" (n={min(part['n'])})")
        shown.append(format_float(part["d"]) + interval)
    return "; ".join(shown) or "—"


def _paper(record: dict) -> str:
    if record["kind"] == "value":
        return format_float(record["value"]["printed"]) if record["value"]["printed"] is not None else "—"
    effects = [format_float(part["paper_effect"]) for part in record["parts"] if part["d"] is not None]
    return "; ".join(effects) or "—"


def _why(record: dict) -> str:
    notes = [record["reason"], record["partial"], record.get("paper_against", "")]
    notes += [f"proxy: {text}" for text in record["proxies"]]
    return "; ".join(note for note in notes if note)


def claim_rows(records: list[dict]) -> list[list[str]]:
    return [[record["text"], record["where"], _paper(record), _ours(record), record["shown"], _why(record)]
            for record in records if record["verdict"] != NOT_RUN]




def claims_markdown(paper: str, records: list[dict]) -> str:
    """``<paper>/claims.md``: every claim about runs with our verdict, the judged ones as a grid."""
    rows = claim_rows(records) + [[r["text"], r["where"], "—", "—", r["shown"], r["not_run"]]
                                  for r in records if r["verdict"] == NOT_RUN]
    return "\n".join([f"# {paper}: claims judged on our runs", "", RULE_TEXT, "",
                      markdown_grid(HEADER, rows) if rows else "No claim of this paper cites a table cell.", ""])


RULE_TEXT = ("Each claim's formula is evaluated on our cells (docs/verdicts.md): orderings by a 95 % t-test "
             "(paired on matched seeds and data order, Welch otherwise) with Holm across the claim's parts, a tie "
             "(a == b) contradicted by a significant difference and never reproduced; "
             "values by a 95 % interval, judged at the paper's scale only. Brackets: 95 % intervals of our "
             "difference; the paper's effect is its own printed difference.")
