"""Sudoku puzzles -> solutions for NCM's Sudoku experiment (Table 3: whole-board accuracy by tier).

Protocol (FMLM+ ``sudoku_generator.py``, the baseline the paper compares with, as summarised for
this project; its code is not vendored here):

* tiers by number of givens: easy 40, medium 35, hard 30 (:data:`TIERS`);
* a full solution grid is built by a backtracking fill in row-major order that tries, at each
  cell, the digits 1-9 in a freshly shuffled order;
* cells are then emptied one by one in a shuffled order of all 81 cells; an emptying is kept only if
  the puzzle still has exactly one solution (:func:`count_solutions` with ``limit=2``), and the
  process stops when the tier's number of givens is reached. If the order runs out first (the
  removal stalls), the puzzle is discarded and a new grid is filled from the same random stream:
  a puzzle always has exactly the tier's givens.

Choices made here (the protocol does not fix them):

* **Seeding.** Puzzle ``i`` depends only on ``(seed, stream, givens, i)``: its random stream is
  ``random.Random(f"sudoku/{seed}/{stream}/{givens}/{i}")``; a string seed goes through SHA-512,
  so it is the same in every process (unlike ``hash()``, which is salted per process). Split
  streams: train 0, valid 1, test 2. Growing ``n`` never changes the first puzzles.
* **Deduplication.** On the solution grid, across all tiers and splits. Precedence is test, then
  valid, then train: a split skips (and does not count) any puzzle whose solution an earlier split
  or an earlier row of its own already holds, so the test set does not change when train grows.
  With ~6.7e21 grids a collision is practically never seen; the rule only guarantees disjointness.
* **Order.** Within a split the tiers are interleaved round-robin (tier order as configured):
  row ``k`` is tier ``tiers[k % len(tiers)]``.
* **Serialization** (the paper's L = 89): 9 rows of 9 characters joined by ``|``, ``0`` for an
  empty cell, e.g. ``530070000|600195000|...``. :func:`parse` also reads the common 81-character
  form, with ``0`` or ``.`` for empty.
* **Solver.** Exact, pure Python: bitmask candidates per row, column and box, constraint
  propagation by naked singles, then branching on the empty cell with the fewest candidates (MRV).
  Measured on one core of the development machine (Python 3.11, 300 puzzles per tier, seed 0):
  generation takes 1.6 ms (easy, 40 givens), 1.9 ms (medium, 35) and 2.7 ms (hard, 30) per puzzle, i.e.
  about 620, 530 and 375 puzzles/s; counting the solutions of a generated hard puzzle to 2 takes 0.15
  ms, of a 21-given "hardest" puzzle (Inkala's) 30 ms; :func:`read_csv` checks the 20,000 Kaggle rows of
  the local copy (docs/sources.md, "Local copies of real data") in 1.8 s. At 30 and more givens no
  removal stalled in 600 puzzles (at 25 givens, 36 of 200 did).
* **Scoring.** :func:`board_correct` compares the decoded prediction, exactly as given (no strip),
  with the solution; a malformed prediction is wrong, never an error. Puzzles have one solution,
  so this equals "a valid board that keeps the givens" (:func:`is_valid_board`).

External data (:func:`read_csv`): the Kaggle ``quizzes,solutions`` CSV (81-character strings), each
row checked (unique solution, solution valid and matching the puzzle) and served as tier
``external``.

Interface::

    serialize(grid) -> str                      parse(text, where="") -> list[int]
    count_solutions(grid, limit=2) -> int       solve(grid, where="") -> list[int]
    is_valid_board(board, puzzle) -> bool       board_correct(predicted, puzzle, solution) -> bool
    generate(n, givens, seed, stream) -> list[dict]     documents(cfg, seed) -> {split: rows}
    read_csv(path) -> rows
"""
from __future__ import annotations

import csv
import random
from itertools import count
from pathlib import Path
from typing import Iterator

from common.errors import ReproError

TIERS = {"easy": 40, "medium": 35, "hard": 30}
STREAMS = {"train": 0, "valid": 1, "test": 2}
PRECEDENCE = ("test", "valid", "train")  # who keeps a puzzle whose solution two splits share
MIN_GIVENS = 25  # below this, random removal stalls most of the time (minimal puzzles have ~24 givens)

_FULL = 0x1FF
_DIGIT = {1 << d: d + 1 for d in range(9)}
_POP = [bin(m).count("1") for m in range(512)]
# the three units of each cell: row r, column 9 + c, box 18 + b
_UNITS = [(i // 9, 9 + i % 9, 18 + (i // 27) * 3 + (i % 9) // 3) for i in range(81)]
_UNIT_CELLS = [[i for i in range(81) if u in _UNITS[i]] for u in range(27)]
_UNIT_NAMES = [f"{kind} {k + 1}" for kind in ("row", "column", "box") for k in range(9)]
_CELL_VALUES = {**{str(d): d for d in range(10)}, ".": 0}


class SudokuError(ReproError, ValueError):
    """A malformed grid, an unsolvable or ambiguous puzzle, a bad file row or config key."""


def _at(where: str) -> str:
    return f"{where}: " if where else ""


def _cell(i: int) -> str:
    return f"row {i // 9 + 1}, column {i % 9 + 1}"


# ---------------------------------------------------------------- text


def serialize(grid: list[int]) -> str:
    """81 cells (0 = empty) -> 9 rows of 9 digits joined by ``|`` (89 characters)."""
    _check_grid(grid, "serialize")
    cells = "".join(map(str, grid))
    return "|".join(cells[r * 9:r * 9 + 9] for r in range(9))


def parse(text: str, where: str = "") -> list[int]:
    """The 89-character serialization or the 81-character form (``0`` or ``.`` empty) -> 81 ints."""
    if not isinstance(text, str):
        raise SudokuError(f"{_at(where)}a grid must be text, got {type(text).__name__}")
    if len(text) == 89:
        bad = next((k for k, ch in enumerate(text) if (ch == "|") != (k % 10 == 9)), None)
        if bad is not None:
            raise SudokuError(f"{_at(where)}character {bad + 1} of the 89-character grid is {text[bad]!r}; "
                              "'|' must separate the 9 rows (characters 10, 20, ..., 80) and appear nowhere else")
        text = text.replace("|", "")
    elif len(text) != 81:
        raise SudokuError(f"{_at(where)}the grid has {len(text)} characters; write 81 cells (digits, 0 or '.' "
                          "for empty) or 9 rows of 9 joined by '|' (89 characters)")
    cells = [_CELL_VALUES.get(ch) for ch in text]
    if None in cells:
        i = cells.index(None)
        raise SudokuError(f"{_at(where)}the cell at {_cell(i)} is {text[i]!r}; "
                          "a cell is a digit 1-9, or 0 or '.' when empty")
    return cells


def _check_grid(grid, where: str) -> None:
    if len(grid) != 81 or any(type(v) is not int or not 0 <= v <= 9 for v in grid):
        raise SudokuError(f"{_at(where)}a grid is a list of 81 ints 0-9 (0 = empty)")


# ---------------------------------------------------------------- solving


def _used(grid: list[int]) -> list[int] | None:
    """Digit bitmasks of the 27 units, or None when two givens of a unit clash."""
    used = [0] * 27
    for i, v in enumerate(grid):
        if v:
            bit = 1 << (v - 1)
            for u in _UNITS[i]:
                if used[u] & bit:
                    return None
                used[u] |= bit
    return used


def _place(grid, used, i, bit) -> None:
    grid[i] = _DIGIT[bit]
    a, b, c = _UNITS[i]
    used[a] |= bit
    used[b] |= bit
    used[c] |= bit


def _unplace(grid, used, i) -> None:
    bit = 1 << (grid[i] - 1)
    a, b, c = _UNITS[i]
    used[a] ^= bit
    used[b] ^= bit
    used[c] ^= bit
    grid[i] = 0


def _propagate(grid, used, empty, placed) -> tuple[int, int] | None:
    """Fill naked singles until none is left (appending them to ``placed``). Returns the empty cell
    with the fewest candidates and its candidates, ``(-1, 0)`` when the grid is full, None on a
    dead end (a cell without candidates)."""
    while True:
        progress, best, best_n, best_cand = False, -1, 10, 0
        for i in empty:
            if grid[i]:
                continue
            a, b, c = _UNITS[i]
            cand = ~(used[a] | used[b] | used[c]) & _FULL
            n = _POP[cand]
            if n == 1:
                _place(grid, used, i, cand)
                placed.append(i)
                progress = True
            elif n == 0:
                return None
            elif n < best_n:
                best, best_n, best_cand = i, n, cand
        if not progress:
            return best, best_cand


def _search(grid, used, empty, limit, found) -> int:
    """The number of solutions of ``grid`` (up to ``limit``), each appended to ``found``. Restores the grid."""
    placed: list[int] = []
    branch = _propagate(grid, used, empty, placed)
    total = 0
    if branch is not None:
        i, cand = branch
        if i < 0:
            found.append(grid[:])
            total = 1
        else:
            rest = [j for j in empty if not grid[j] and j != i]
            while cand and total < limit:
                bit = cand & -cand
                cand ^= bit
                _place(grid, used, i, bit)
                total += _search(grid, used, rest, limit - total, found)
                _unplace(grid, used, i)
    for j in placed:
        _unplace(grid, used, j)
    return total


def _solutions(grid: list[int], limit: int, where: str = "") -> tuple[int, list[list[int]]]:
    _check_grid(grid, where)
    used = _used(grid)
    if used is None:
        return 0, []
    work, found = list(grid), []
    n = _search(work, used, [i for i in range(81) if not grid[i]], limit, found)
    return n, found


def count_solutions(grid: list[int], limit: int = 2) -> int:
    """The number of solutions of a puzzle (81 ints, 0 = empty), counted up to ``limit``."""
    return _solutions(grid, limit)[0]


def solve(grid: list[int], where: str = "") -> list[int]:
    """The unique solution of a puzzle; SudokuError (naming ``where``) if it has none or several."""
    n, found = _solutions(grid, 2, where)
    if n != 1:
        raise SudokuError(f"{_at(where)}the puzzle has {'no solution' if n == 0 else 'several solutions'}; "
                          "a puzzle must have exactly one")
    return found[0]


def _board_problem(board: list[int], puzzle: list[int]) -> str | None:
    """What makes ``board`` not a solution of ``puzzle`` (one phrase), or None."""
    if len(board) != 81 or len(puzzle) != 81:
        return "a board and a puzzle have 81 cells"
    for name, cells in zip(_UNIT_NAMES, _UNIT_CELLS):
        if sorted(board[i] for i in cells) != [1, 2, 3, 4, 5, 6, 7, 8, 9]:
            return f"{name} is not a permutation of 1-9"
    i = next((i for i in range(81) if puzzle[i] and board[i] != puzzle[i]), None)
    return None if i is None else f"the cell at {_cell(i)} is {board[i]} but the puzzle gives {puzzle[i]}"


def is_valid_board(board: list[int], puzzle: list[int]) -> bool:
    """Every row, column and box of ``board`` is a permutation of 1-9 and it keeps the puzzle's givens."""
    return _board_problem(board, puzzle) is None


def board_correct(predicted: str, puzzle: str, solution: str) -> bool:
    """Whole-board accuracy of one decoded prediction: True iff it parses (89 or 81 characters, as
    given) to the solution. A malformed prediction is False; an inconsistent reference pair (the
    solution does not solve the puzzle) is a SudokuError, since it is a data bug."""
    puz, sol = parse(puzzle, "puzzle"), parse(solution, "solution")
    problem = _board_problem(sol, puz)
    if problem:
        raise SudokuError(f"solution {solution} does not solve puzzle {puzzle}: {problem}; fix the reference data")
    try:
        return parse(predicted) == sol
    except SudokuError:
        return False


# ---------------------------------------------------------------- generation


def _fill(rng: random.Random) -> list[int]:
    """A full grid: row-major backtracking, each cell trying 1-9 in a fresh shuffled order."""
    grid, used = [0] * 81, [0] * 27

    def fill_from(i: int) -> bool:
        if i == 81:
            return True
        a, b, c = _UNITS[i]
        free = ~(used[a] | used[b] | used[c]) & _FULL
        digits = list(range(1, 10))
        rng.shuffle(digits)
        for d in digits:
            bit = 1 << (d - 1)
            if free & bit:
                _place(grid, used, i, bit)
                if fill_from(i + 1):
                    return True
                _unplace(grid, used, i)
        return False

    fill_from(0)
    return grid


def _dig(solution: list[int], givens: int, rng: random.Random) -> list[int] | None:
    """Empty cells in a shuffled order, keeping each emptying that leaves one solution; None if the
    order runs out before only ``givens`` cells are left."""
    puzzle, left = list(solution), 81
    order = list(range(81))
    rng.shuffle(order)
    for i in order:
        if left == givens:
            break
        puzzle[i] = 0
        if count_solutions(puzzle, 2) == 1:
            left -= 1
        else:
            puzzle[i] = solution[i]
    return puzzle if left == givens else None


def _puzzle(seed: int, stream: int, givens: int, i: int) -> dict:
    """Puzzle ``i`` of a stream: a function of ``(seed, stream, givens, i)`` only."""
    rng = random.Random(f"sudoku/{seed}/{stream}/{givens}/{i}")
    while True:
        solution = _fill(rng)
        puzzle = _dig(solution, givens, rng)
        if puzzle is not None:
            return {"source": serialize(puzzle), "target": serialize(solution), "givens": givens}


def generate(n: int, givens: int, seed: int, stream: int) -> list[dict]:
    """Puzzles ``0..n-1`` of a stream: ``{"source": puzzle, "target": solution, "givens"}`` (89 chars)."""
    if type(givens) is not int or not MIN_GIVENS <= givens <= 81:
        raise SudokuError(f"givens={givens!r}: use an integer from {MIN_GIVENS} to 81 "
                          f"(tiers: {', '.join(f'{t} {g}' for t, g in TIERS.items())})")
    return [_puzzle(seed, stream, givens, i) for i in range(n)]


def _check_cfg(cfg: dict) -> tuple[list[str], dict]:
    unknown = sorted(set(cfg) - {"tiers", "n"})
    if unknown:
        raise SudokuError(f"sudoku.{unknown[0]}: unknown key; use tiers and n")
    tiers, n = cfg.get("tiers"), cfg.get("n")
    if not isinstance(tiers, list) or not tiers or len(set(tiers)) != len(tiers):
        raise SudokuError(f"sudoku.tiers={tiers!r}: give a non-empty list of distinct tiers from {list(TIERS)}")
    for tier in tiers:
        if tier not in TIERS:
            raise SudokuError(f"sudoku.tiers: unknown tier {tier!r}; use {', '.join(TIERS)}")
    if not isinstance(n, dict) or set(n) != set(STREAMS):
        raise SudokuError(f"sudoku.n={n!r}: give puzzles per tier for each split, e.g. "
                          "{train: 3000, valid: 100, test: 200}")
    for split, k in n.items():
        if type(k) is not int or k < 1:
            raise SudokuError(f"sudoku.n.{split}={k!r}: must be an integer >= 1")
    return tiers, n


def _tier_rows(tier: str, seed: int, split: str, seen: set) -> Iterator[dict]:
    """Puzzles 0, 1, ... of a tier's stream, skipping any whose solution is in ``seen`` (then added)."""
    for i in count():
        row = _puzzle(seed, STREAMS[split], TIERS[tier], i)
        if row["target"] not in seen:
            seen.add(row["target"])
            yield {"source": row["source"], "target": row["target"], "text": row["target"],
                   "tier": tier, "givens": row["givens"]}


def _split_rows(tiers: list[str], n: int, seed: int, split: str, seen: set) -> Iterator[dict]:
    streams = [_tier_rows(tier, seed, split, seen) for tier in tiers]
    for _ in range(n):
        for rows in streams:
            yield next(rows)


def documents(cfg: dict, seed: int) -> dict[str, Iterator[dict]]:
    """Rows ``{"source", "target", "text" (= target), "tier", "givens"}`` per split for the corpus
    stage; ``cfg = {"tiers": [...], "n": {"train", "valid", "test"}}`` with n per tier and split.
    Test and valid are generated once, when first needed (train needs them to deduplicate)."""
    tiers, n = _check_cfg(cfg)
    held: dict[str, list[dict]] = {}

    def held_out(split: str) -> list[dict]:
        if split not in held:
            seen = {r["target"] for s in PRECEDENCE[:PRECEDENCE.index(split)] for r in held_out(s)}
            held[split] = list(_split_rows(tiers, n[split], seed, split, seen))
        return held[split]

    def rows(split: str) -> Iterator[dict]:
        if split != "train":
            yield from held_out(split)
            return
        seen = {r["target"] for s in ("test", "valid") for r in held_out(s)}
        yield from _split_rows(tiers, n["train"], seed, "train", seen)

    return {split: rows(split) for split in STREAMS}


# ---------------------------------------------------------------- external files


def _csv_row(fields: list[str], where: str) -> dict:
    """One checked ``quizzes,solutions`` row -> a corpus row of tier ``external``."""
    if len(fields) != 2:
        raise SudokuError(f"{where}: {len(fields)} fields; a row is 'puzzle,solution'")
    puzzle, solution = parse(fields[0], f"{where}: puzzle"), parse(fields[1], f"{where}: solution")
    n = count_solutions(puzzle, 2)
    if n != 1:
        raise SudokuError(f"{where}: the puzzle has {'no solution' if n == 0 else 'several solutions'}; "
                          "drop the row or fix its givens")
    problem = _board_problem(solution, puzzle)
    if problem:
        raise SudokuError(f"{where}: the solution is wrong ({problem}); fix or drop the row")
    return {"source": serialize(puzzle), "target": serialize(solution), "text": serialize(solution),
            "tier": "external", "givens": sum(1 for v in puzzle if v)}


def read_csv(path) -> Iterator[dict]:
    """Rows of a Kaggle-style CSV: header ``quizzes,solutions``, then 81-character puzzle and
    solution (``0`` or ``.`` empty). Every row is checked (:func:`_csv_row`); errors name
    ``file:line`` (1-based). A UTF-8 BOM is ignored; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise SudokuError(f"{path}: no such file; fix the path to the quizzes,solutions CSV")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise SudokuError(f"{path}: the file is empty; expected a 'quizzes,solutions' header and rows")
        if header != ["quizzes", "solutions"]:
            raise SudokuError(f"{path}:1: the header is {','.join(header)!r}; the first line must be "
                              "'quizzes,solutions'")
        rows = 0
        for fields in reader:
            if fields:
                rows += 1
                yield _csv_row(fields, f"{path}:{reader.line_num}")
        if not rows:
            raise SudokuError(f"{path}: no rows after the header; add 'puzzle,solution' lines")
