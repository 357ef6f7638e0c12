"""Sudoku puzzles (corpora.sudoku): solver, validator, generator protocol, splits, CSV import, scoring."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

import corpora.sudoku as sd
from corpora.sudoku import (TIERS, SudokuError, board_correct, count_solutions, documents, generate,
                            is_valid_board, parse, read_csv, serialize, solve)

ROOT = Path(__file__).resolve().parents[2]
# the Wikipedia example puzzle and its solution
PUZZLE = "530070000600195000098000060800060003400803001700020006060000280000419005000080079"
SOLUTION = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"
P, S = parse(PUZZLE), parse(SOLUTION)


def _naive_count(grid: list[int], limit: int = 2) -> int:
    """A second, simple counter: row-major backtracking checking each digit against its peers."""
    g = list(grid)

    def ok(i: int, d: int) -> bool:
        r, c = divmod(i, 9)
        br, bc = r - r % 3, c - c % 3
        return all(g[r * 9 + k] != d and g[k * 9 + c] != d for k in range(9)) and all(
            g[(br + a) * 9 + bc + b] != d for a in range(3) for b in range(3))

    def rec(i: int) -> int:
        while i < 81 and g[i]:
            i += 1
        if i == 81:
            return 1
        n = 0
        for d in range(1, 10):
            if ok(i, d):
                g[i] = d
                n += rec(i + 1)
                g[i] = 0
                if n >= limit:
                    break
        return n

    return rec(0)


def _set_valid(board: list[int]) -> bool:
    """Independent of the module: each of the 27 units holds the digits 1-9."""
    units = [[r * 9 + c for c in range(9)] for r in range(9)] + [[r * 9 + c for r in range(9)] for c in range(9)]
    units += [[(br + a) * 9 + bc + b for a in range(3) for b in range(3)] for br in (0, 3, 6) for bc in (0, 3, 6)]
    return all({board[i] for i in u} == set(range(1, 10)) for u in units)


def _peer_givens(grid: list[int], i: int) -> set[int]:
    r, c = divmod(i, 9)
    return {grid[j] for j in range(81) if j // 9 == r or j % 9 == c or (j // 27, j % 9 // 3) == (r // 3, c // 3)}


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# ---------------------------------------------------------------- solver and validator


def test_known_puzzle_solves_to_its_solution():
    assert count_solutions(P, 2) == 1
    assert solve(P) == S
    assert is_valid_board(S, P) and _set_valid(S)
    assert P == parse(PUZZLE)  # the solver leaves its input alone


def _swap(board: list[int], i: int, j: int) -> list[int]:
    b = list(board)
    b[i], b[j] = b[j], b[i]
    return b


@pytest.mark.parametrize("board", [
    _swap(S, 0, 1),                                                   # same row and box: two columns break
    _swap(S, 0, 9),                                                   # same column and box: two rows break
    [(r + c) % 9 + 1 for r in range(9) for c in range(9)],            # rows and columns fine, boxes not
    S[:80] + [S[79]],                                                 # a duplicate in the last row
    S[:40] + [0] + S[41:],                                            # an empty cell
], ids=["columns", "rows", "boxes", "duplicate", "empty"])
def test_invalid_boards_are_rejected(board):
    assert not is_valid_board(board, [0] * 81)


def test_a_valid_board_must_keep_the_givens():
    relabeled = [v % 9 + 1 for v in S]  # still a valid board, but not this puzzle's
    assert _set_valid(relabeled) and is_valid_board(relabeled, [0] * 81)
    assert not is_valid_board(relabeled, P)
    assert not is_valid_board(S[:80], P)


def test_unsolvable_puzzles():
    direct = list(P)
    direct[2] = 5  # a second 5 in row 1
    assert count_solutions(direct) == 0
    indirect = [0] * 81
    indirect[1:9] = range(1, 9)  # row 1 leaves 9 for its first cell ...
    indirect[9] = 9              # ... which its column already holds
    assert count_solutions(indirect) == 0
    i, d = next((i, d) for i in range(81) for d in range(1, 10)
                if not P[i] and d != S[i] and d not in _peer_givens(P, i))  # clashes with no given
    deep = list(P)
    deep[i] = d
    assert count_solutions(deep) == 0 == _naive_count(deep)
    with pytest.raises(SudokuError, match="puzzles.csv:17: the puzzle has no solution") as e:
        solve(deep, "puzzles.csv:17")
    _one_line(e)


def _unique_rectangle(board: list[int]) -> tuple[int, int, int, int]:
    """Four cells a b / b a in two rows of one band and two columns of two stacks (so two boxes)."""
    for r1 in range(9):
        for r2 in range(r1 + 1, (r1 // 3) * 3 + 3):
            for c1 in range(9):
                for c2 in range((c1 // 3) * 3 + 3, 9):
                    cells = r1 * 9 + c1, r1 * 9 + c2, r2 * 9 + c1, r2 * 9 + c2
                    a, b, c, d = (board[i] for i in cells)
                    if a == d and b == c:
                        return cells
    raise AssertionError("no unique rectangle")


def test_puzzles_with_several_solutions():
    assert count_solutions([0] * 81, 2) == 2
    assert count_solutions([0] * 81, 1) == 1
    with pytest.raises(SudokuError, match="several solutions") as e:
        solve([0] * 81, "x.csv:3")
    assert _one_line(e).startswith("x.csv:3: ")
    two = list(S)
    for i in _unique_rectangle(S):
        two[i] = 0
    assert count_solutions(two, 10) == 2 == _naive_count(two, 10)


# ---------------------------------------------------------------- generation


@pytest.mark.parametrize("tier", list(TIERS))
def test_generated_puzzles_follow_the_protocol(tier):
    givens = TIERS[tier]
    rows = generate(3, givens, seed=5, stream=2)
    for k, row in enumerate(rows):
        puzzle, solution = parse(row["source"]), parse(row["target"])
        assert row["givens"] == givens == sum(1 for v in puzzle if v)
        assert len(row["source"]) == len(row["target"]) == 89
        assert _set_valid(solution) and all(p in (0, s) for p, s in zip(puzzle, solution))
        assert count_solutions(puzzle, 2) == 1
        if k == 0:
            assert _naive_count(puzzle) == 1
    assert len({r["target"] for r in rows}) == 3


def test_generation_is_deterministic_per_index():
    few = generate(2, 35, seed=7, stream=1)
    assert generate(4, 35, seed=7, stream=1)[:2] == few
    assert generate(2, 35, seed=8, stream=1) != few
    assert generate(2, 35, seed=7, stream=0) != few


def test_generation_is_the_same_in_another_process():
    code = "import json; from corpora.sudoku import generate; print(json.dumps(generate(2, 40, 3, 0)))"
    outs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    assert json.loads(outs[0]) == json.loads(outs[1]) == generate(2, 40, 3, 0)


def test_a_stalled_removal_is_discarded(monkeypatch):
    assert sd._dig(S, 17, random.Random(0)) is None  # random removal stops far above 17 givens
    calls = []

    def stall_once(solution, givens, rng):
        calls.append(solution)
        return None if len(calls) == 1 else dig(solution, givens, rng)

    dig = sd._dig
    monkeypatch.setattr(sd, "_dig", stall_once)
    row = generate(1, 35, seed=0, stream=0)[0]
    assert len(calls) == 2 and calls[0] != calls[1] and row["target"] == serialize(calls[1])
    assert sum(1 for v in parse(row["source"]) if v) == 35


def test_generate_rejects_unreachable_givens():
    with pytest.raises(SudokuError, match="givens=17") as e:
        generate(1, 17, 0, 0)
    _one_line(e)


# ---------------------------------------------------------------- splits


CFG = {"tiers": ["easy", "hard"], "n": {"train": 3, "valid": 2, "test": 2}}


def _all(docs: dict) -> dict:
    return {s: list(rows) for s, rows in docs.items()}


def test_documents_interleave_tiers_and_split_disjointly():
    out = _all(documents(CFG, seed=0))
    assert {s: len(r) for s, r in out.items()} == {"train": 6, "valid": 4, "test": 4}
    for rows in out.values():
        assert [r["tier"] for r in rows] == ["easy", "hard"] * (len(rows) // 2)
        for r in rows:
            assert r["text"] == r["target"] and r["givens"] == TIERS[r["tier"]]
            assert set(r) == {"source", "target", "text", "tier", "givens"}
    targets = [r["target"] for rows in out.values() for r in rows]
    assert len(set(targets)) == len(targets)
    for split, stream in (("train", 0), ("valid", 1), ("test", 2)):  # no repeats here, so split = stream
        hard = generate(len(out[split]) // 2, TIERS["hard"], 0, stream)
        assert [r["source"] for r in out[split][1::2]] == [r["source"] for r in hard]


def test_documents_do_not_depend_on_iteration_order_or_train_size():
    first = _all(documents(CFG, seed=0))
    docs = documents(CFG, seed=0)
    reverse = {s: list(docs[s]) for s in ("test", "valid", "train")}
    assert reverse == first
    bigger = _all(documents({**CFG, "n": {"train": 4, "valid": 2, "test": 2}}, seed=0))
    assert bigger["test"] == first["test"] and bigger["train"][:6] == first["train"]


def test_documents_drop_repeated_solutions(monkeypatch):
    """A generator that repeats itself across streams: the test set keeps its puzzles, the others skip them."""
    def fake(seed, stream, givens, i):
        solution = [(v + i) % 9 + 1 for v in S]  # 9 distinct grids, the same in every stream
        return {"source": serialize(solution), "target": serialize(solution), "givens": givens}

    monkeypatch.setattr(sd, "_puzzle", fake)
    out = _all(documents({"tiers": ["easy"], "n": {"train": 3, "valid": 2, "test": 2}}, seed=0))
    targets = {s: [r["target"] for r in rows] for s, rows in out.items()}
    assert targets["test"] == [fake(0, 2, 40, i)["target"] for i in (0, 1)]
    assert targets["valid"] == [fake(0, 1, 40, i)["target"] for i in (2, 3)]
    assert targets["train"] == [fake(0, 0, 40, i)["target"] for i in (4, 5, 6)]


@pytest.mark.parametrize("cfg, key", [
    ({"tiers": ["easy"], "n": CFG["n"], "size": 3}, "sudoku.size"),
    ({"tiers": ["easy", "extreme"], "n": CFG["n"]}, "extreme"),
    ({"tiers": [], "n": CFG["n"]}, "sudoku.tiers"),
    ({"tiers": ["easy", "easy"], "n": CFG["n"]}, "sudoku.tiers"),
    ({"tiers": ["easy"], "n": {"train": 3, "test": 2}}, "sudoku.n"),
    ({"tiers": ["easy"], "n": {"train": 0, "valid": 2, "test": 2}}, "sudoku.n.train"),
])
def test_documents_reject_bad_config(cfg, key):
    with pytest.raises(SudokuError) as e:
        documents(cfg, seed=0)
    assert key in _one_line(e)


# ---------------------------------------------------------------- text


def test_serialize_and_parse_round_trip():
    text = serialize(P)
    assert text == "530070000|600195000|098000060|800060003|400803001|700020006|060000280|000419005|000080079"
    assert len(text) == 89 and parse(text) == P
    assert parse(PUZZLE.replace("0", ".")) == P
    with pytest.raises(SudokuError):
        serialize(P[:80])


@pytest.mark.parametrize("text, fragment", [
    (PUZZLE[:80], "80 characters"),
    (PUZZLE[:40] + "x" + PUZZLE[41:], "row 5, column 5 is 'x'"),
    (PUZZLE[:40] + "|" + PUZZLE[41:], "is '|'"),
    (serialize(P).replace("|", "0", 1)[:88] + "|", "character 10"),
    (serialize(P)[:5] + "|" + serialize(P)[6:], "character 6"),
])
def test_parse_errors_name_the_place(text, fragment):
    with pytest.raises(SudokuError) as e:
        parse(text, "puzzles.csv:17")
    msg = _one_line(e)
    assert msg.startswith("puzzles.csv:17: ") and fragment in msg


# ---------------------------------------------------------------- external CSV


def _write(tmp_path: Path, lines: list[str], bom: bool = False) -> Path:
    path = tmp_path / "puzzles.csv"
    path.write_text(("\ufeff" if bom else "") + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_read_csv_reads_checked_rows(tmp_path):
    gen = generate(1, 30, seed=0, stream=9)[0]
    flat = gen["source"].replace("|", "").replace("0", "."), gen["target"].replace("|", "")
    path = _write(tmp_path, ["quizzes,solutions", f"{PUZZLE},{SOLUTION}", "", ",".join(flat)], bom=True)
    rows = list(read_csv(path))
    assert rows == [
        {"source": serialize(P), "target": serialize(S), "text": serialize(S), "tier": "external", "givens": 30},
        {**gen, "text": gen["target"], "tier": "external"}]


def _variant(puzzle: str = PUZZLE, solution: str = SOLUTION) -> str:
    return f"{puzzle},{solution}"


_NO_SOLUTION = PUZZLE[:2] + "5" + PUZZLE[3:]
_SEVERAL = "".join("0" if i in _unique_rectangle(S) else ch for i, ch in enumerate(SOLUTION))
_BAD_CASES = {
    "fields": (f"{PUZZLE},{SOLUTION},x", "3 fields"),
    "one field": (PUZZLE, "1 fields"),
    "length": (_variant(PUZZLE[:79]), "79 characters"),
    "character": (_variant(solution=SOLUTION[:9] + "a" + SOLUTION[10:]), "'a'"),
    "no solution": (_variant(_NO_SOLUTION), "no solution"),
    "several": (_variant(_SEVERAL, SOLUTION), "several solutions"),
    "invalid solution": (_variant(solution=SOLUTION[:80] + "8"), "not a permutation"),
    "solution mismatch": (_variant(solution="".join(str(int(c) % 9 + 1) for c in SOLUTION)), "the puzzle gives"),
    "empty solution cell": (_variant(solution=SOLUTION[:80] + "0"), "not a permutation"),
}


@pytest.mark.parametrize("case", list(_BAD_CASES))
def test_read_csv_errors_name_file_and_line(tmp_path, case):
    line, fragment = _BAD_CASES[case]
    path = _write(tmp_path, ["quizzes,solutions", _variant(), line])
    with pytest.raises(SudokuError) as e:
        list(read_csv(path))
    msg = _one_line(e)
    assert f"{path}:3" in msg and fragment in msg


@pytest.mark.parametrize("lines, fragment", [
    ([], "empty"),
    ([_variant()], ":1: the header"),
    (["puzzle,solution", _variant()], ":1: the header"),
    (["quizzes,solutions"], "no rows"),
])
def test_read_csv_rejects_bad_files(tmp_path, lines, fragment):
    path = _write(tmp_path, lines)
    with pytest.raises(SudokuError) as e:
        list(read_csv(path))
    assert fragment in _one_line(e) and str(path) in str(e.value)
    with pytest.raises(SudokuError, match="no such file"):
        list(read_csv(tmp_path / "missing.csv"))


# ---------------------------------------------------------------- scoring


def _predictions() -> dict[str, str]:
    sol = serialize(S)
    wrong = _swap(S, 0, 1)
    return {
        "correct": sol, "correct 81": SOLUTION, "swapped": serialize(wrong),
        "other valid board": serialize([v % 9 + 1 for v in S]),
        "the puzzle itself": serialize(P), "short": sol[:-1], "letters": sol[:-1] + "x", "trailing space": sol + " ",
        "zeros": sol[:-1] + "0", "dots": sol[:-1] + ".", "empty": "", "misplaced bar": "|" + sol[:-1],
    }


def test_board_correct():
    preds = _predictions()
    got = {k: board_correct(v, serialize(P), serialize(S)) for k, v in preds.items()}
    assert got == {k: k.startswith("correct") for k in preds}
    assert board_correct(None, PUZZLE, SOLUTION) is False


def test_board_correct_equals_valid_and_givens_kept():
    """Puzzles have one solution, so 'equals the solution' is 'a valid board keeping the givens'."""
    for pred in _predictions().values():
        try:
            board = parse(pred)
        except SudokuError:
            assert not board_correct(pred, PUZZLE, SOLUTION)
            continue
        assert board_correct(pred, PUZZLE, SOLUTION) == is_valid_board(board, P)
    for row in generate(2, 30, seed=1, stream=0):
        assert board_correct(row["target"], row["source"], row["target"])
        assert is_valid_board(parse(row["target"]), parse(row["source"]))


def test_board_correct_rejects_an_inconsistent_reference():
    with pytest.raises(SudokuError, match="does not solve") as e:
        board_correct(SOLUTION, PUZZLE, "".join(str(int(c) % 9 + 1) for c in SOLUTION))
    _one_line(e)
