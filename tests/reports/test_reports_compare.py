"""python -m reports compare: two results folders, what changed between them."""
import shutil

from reports.__main__ import main
from tests.tables.test_tables_verdicts import write_results

OURS = {"base_gpt2_s": [20.0, 20.2, 19.8], "pm_gpt2_s": [22.0, 22.1, 21.9], "conceptlm_gpt2_s": [18.0, 18.1, 17.9]}


def folder(root, shift):
    """Embedded runs of ConceptLM Table 1's GPT-2 355M block; PM moved by ``shift``."""
    runs = root / "runs"
    for experiment, seeds in OURS.items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value + (shift if experiment == "pm_gpt2_s" else 0.0)}
                                                for value in seeds])
    return runs


def test_identical_folders_say_no_change(tmp_path, capsys):
    a = folder(tmp_path / "a", 0.0)
    shutil.copytree(a, tmp_path / "b")
    assert main(["compare", str(a), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "No change." in out and " 0 differ;" in out


def test_a_changed_row_shows_its_cells_and_verdicts(tmp_path, capsys):
    a, b = folder(tmp_path / "a", 0.0), folder(tmp_path / "b", -3.0)  # PM moves from above Base to below it
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "| embedded/foundation | pm_gpt2_s | test_ppl | 22 | 19 |" in out
    assert "| conceptlm/table01 | train_ppl | gpt2_355m_base − gpt2_355m_pm | differs | agrees |" in out
    assert main(["compare", str(a), str(b), "--tolerance", "1"]) == 0
    assert "Cells whose value differs" not in capsys.readouterr().out


def test_a_missing_folder_is_one_line(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "nope"), str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such results folder" in err
