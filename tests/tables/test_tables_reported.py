"""Bad input stops the build with an error naming the file, the line and the field."""
import re

import pytest

from tables.build import build
from tables.reported import load_reported
from tables.specs import load_specs
from tables.validation import DataError

SPEC = """rows: [{id: base, label: Base}, {id: new, label: New, type: text}]
columns: [{id: a, label: A}, {id: avg, label: Avg, formula: "mean(a)"}]
"""
GOOD = "t1,base,a,1.50,2,m,u,lower,pdf,"


def error_for(hand_paper, tmp_path, lines, spec=SPEC, claims=None) -> DataError:
    specs, reported = hand_paper(spec, lines, claims)
    with pytest.raises(DataError) as caught:
        build(tmp_path / "none", specs, reported)
    return caught.value


@pytest.mark.parametrize("bad_line, field, words", [
    ("t1,nope,a,1.50,2,m,u,lower,pdf,", "row", "unknown row 'nope'"),
    ("t1,base,nope,1.50,2,m,u,lower,pdf,", "column", "unknown column 'nope'"),
    ("t1,base,a,8B,0,m,u,lower,pdf,", "value", "non-numeric value '8B'"),
    ("t1,base,a,31.8,2,m,u,lower,pdf,", "decimals", "printed to 1 decimal(s) but decimals is '2'"),
    ("t1,base,a,1.5,,m,u,lower,pdf,", "decimals", "but decimals is ''"),
    ("t1,new,a,text,1,m,u,lower,pdf,", "decimals", "must be empty"),
    ("t1,base,a,1.50,2,m,u,sideways,pdf,", "direction", "is not one of"),
    ("t1,base,a,1.50,2,m,u,lower,nowhere,", "source", "unknown source 'nowhere'"),
    ("t2,base,a,1.50,2,m,u,lower,pdf,", "table", "differs from the file name"),
    ("t1,base,a,1.50,2,m,u,lower,pdf,,extra", "(line)", "expected 10 fields"),
    (GOOD, "row,column", "duplicate cell (base, a); first at"),
])
def test_malformed_reported_line(hand_paper, tmp_path, bad_line, field, words):
    error = error_for(hand_paper, tmp_path, [GOOD, bad_line] if bad_line == GOOD else [bad_line])
    line_number = 3 if bad_line == GOOD else 2
    assert error.path.endswith("t1.csv") and error.line == line_number and error.field == field
    assert words in str(error)
    assert re.search(rf"t1\.csv:{line_number}: field '{re.escape(field)}'", str(error))


def test_csv_without_spec_is_an_unknown_table(hand_paper, tmp_path):
    specs, reported = hand_paper(SPEC, [GOOD])
    (reported / "hand" / "t9.csv").write_text("table,row\n")
    with pytest.raises(DataError, match=r"t9\.csv: field 'table': unknown table 't9'"):
        load_reported(load_specs(specs), reported)


@pytest.mark.parametrize("spec, field, words", [
    (SPEC.replace("mean(a)", "mean(a, zz)"), "columns.avg.formula", "no cell"),
    (SPEC.replace("mean(a)", "__import__('os')"), "columns.avg.formula", "unknown function"),
    (SPEC.replace("{id: new,", "{id: base,"), "rows.1.id", "duplicate id 'base'"),
    (SPEC + "colour: blue\n", "(top level)", "Additional properties"),
])
def test_malformed_spec(hand_paper, tmp_path, spec, field, words):
    error = error_for(hand_paper, tmp_path, [GOOD], spec=spec)
    assert error.path.endswith("t1.yaml") and error.field == field and words in str(error)


def test_spec_schema_errors_carry_the_yaml_line(hand_paper, tmp_path):
    spec = "rows:\n  - {id: base, label: Base}\n  - {id: Bad-Id, label: New}\ncolumns: [{id: a, label: A}]\n"
    error = error_for(hand_paper, tmp_path, [GOOD], spec=spec)
    assert (error.field, error.line) == ("rows.1.id", 7)  # 4 header lines + rows: + first row


def test_malformed_claims(hand_paper, tmp_path):
    claims = "- {id: c, where: S, text: t, printed: 'x1', formula: '1', source: pdf}\n"
    assert "field '0.printed'" in str(error_for(hand_paper, tmp_path, [GOOD], claims=claims))
    claims = "- {id: c, where: S, text: t, formula: \"cell('t1', 'base', 'zz')\", source: pdf}\n"
    assert "field '0.formula'" in str(error_for(hand_paper, tmp_path, [GOOD], claims=claims))
    claims = "- {id: c, where: S, text: t, finding: f, source: pdf}\n"
    assert "claims.yaml" in str(error_for(hand_paper, tmp_path, [GOOD], claims=claims))


def test_a_one_line_addition_is_picked_up(hand_paper, tmp_path):
    specs, reported = hand_paper(SPEC, [GOOD])
    before = build(tmp_path / "none", specs, reported)
    assert [f.status for f in before.findings if f.check.target == ("t1", "base", "avg")] == []
    with (reported / "hand" / "t1.csv").open("a") as handle:
        handle.write("t1,base,avg,1.50,2,m,u,lower,pdf,typed in from the PDF\n")
    after = build(tmp_path / "none", specs, reported)
    assert [f.status for f in after.findings if f.check.target == ("t1", "base", "avg")] == ["consistent"]
