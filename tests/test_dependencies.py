"""Dependencies, checked without the network: every dependency of pyproject.toml has a floor, constraints.txt
pins each at or above it, the running environment satisfies every floor, every third-party import of the
code base is a declared dependency (and every declared dependency is used), and no rule declares a conda
environment that nothing builds."""
from __future__ import annotations

import ast
import importlib.metadata as metadata
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# import name -> distribution, for every third-party module the code base imports
DISTRIBUTION = {
    "datasets": "datasets",
    "filelock": "filelock",
    "huggingface_hub": "huggingface-hub",
    "jsonschema": "jsonschema",
    "lm_eval": "lm-eval",
    "matplotlib": "matplotlib",
    "numpy": "numpy",
    "pandas": "pandas",
    "PIL": "pillow",
    "pyarrow": "pyarrow",
    "pytest": "pytest",
    "rouge_score": "rouge-score",
    "sacrebleu": "sacrebleu",
    "safetensors": "safetensors",
    "scipy": "scipy",
    "snakemake": "snakemake",
    "snakemake_executor_plugin_slurm": "snakemake-executor-plugin-slurm",
    "tokenizers": "tokenizers",
    "torch": "torch",
    "tqdm": "tqdm",
    "transformers": "transformers",
    "yaml": "pyyaml",
}
# declared, used, never imported
NOT_IMPORTED = {"pytest-xdist": "the Makefile's `pytest -n $(CORES)`",
                "ruff": "`make lint` and tests/test_lint.py run its command line",
                "jinja2": "pandas imports it for DataFrame.to_latex (tables/render.py)"}
# never scanned: environments, outputs, caches
SKIP_DIRS = {"results", "build", "__pycache__", "node_modules"}
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?\s*>=\s*([0-9][^,;\s]*)$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def release(version: str) -> tuple[int, ...]:
    """The release numbers of a version ("2.13.0+cpu" -> (2, 13, 0)), trailing zeros dropped."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    assert match, f"not a version: {version!r}"
    parts = [int(p) for p in match.group(0).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def at_least(version: str, floor: str) -> bool:
    return release(version) >= release(floor)


def _string_list(text: str, key: str) -> list[str]:
    """The strings of a TOML list `key = [...]` (one line or several; comments dropped)."""
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    match = re.search(rf"^{key}\s*=\s*\[(.*?)\]\s*$", text, re.S | re.M)
    assert match, f"pyproject.toml: no {key} = [...]"
    return re.findall(r'"([^"]+)"', match.group(1))


def declared(pyproject: str) -> dict[str, dict]:
    """{distribution: {"floor", "extras", "group"}} of [project] dependencies and the test extra; a
    dependency without a `>=` floor is an error."""
    project = pyproject[pyproject.index("[project]"):]
    project = project[:project.index("\n[tool.")] if "\n[tool." in project else project
    groups = {"project": _string_list(project, "dependencies"), "test": _string_list(project, "test")}
    out = {}
    for group, requirements in groups.items():
        for requirement in requirements:
            match = REQUIREMENT.match(requirement.strip())
            assert match, f"pyproject.toml: {requirement!r} is not NAME[extras]>=FLOOR"
            name, extras, floor = match.groups()
            assert canonical(name) not in out, f"pyproject.toml: {name} declared twice"
            out[canonical(name)] = {"floor": floor,
                                    "extras": [e.strip() for e in (extras or "").split(",") if e.strip()],
                                    "group": group}
    return out


def pins(constraints: str) -> dict[str, str]:
    out = {}
    for number, line in enumerate(constraints.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][^\s;]*)", line)
        assert match, f"constraints.txt:{number}: {line!r} is not NAME==VERSION"
        out[canonical(match.group(1))] = match.group(2)
    return out


def pin_problems(floors: dict[str, dict], pinned: dict[str, str]) -> list[str]:
    problems = []
    for name, spec in floors.items():
        if name not in pinned:
            problems.append(f"{name}: declared (>={spec['floor']}) but not pinned in constraints.txt")
        elif not at_least(pinned[name], spec["floor"]):
            problems.append(f"{name}: pinned {pinned[name]} below its floor {spec['floor']}")
    return problems


def first_party() -> set[str]:
    names = {p.stem for p in ROOT.glob("*.py")}
    names |= {p.parent.name for p in ROOT.glob("*/__init__.py")}
    return names


def sources() -> list[Path]:
    """The code base's Python files (.py, .smk, the Snakefile), environments and outputs left out."""
    found = [ROOT / "Snakefile"]
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS and not d.endswith(".egg-info")
                   and not (Path(folder) / d / "pyvenv.cfg").exists()]
        found += [Path(folder) / f for f in files if f.endswith((".py", ".smk"))]
    return sorted(found)


def imported(path: Path) -> set[str]:
    """Top-level names of the absolute imports of a file (a Snakemake file: its import lines)."""
    text = path.read_text()
    if path.suffix == ".py":
        names = set()
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names.add(node.module.split(".")[0])
        return names
    return set(re.findall(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", text, re.M))


def import_problems(by_file: dict[str, set[str]], floors: dict[str, dict], local: set[str]) -> list[str]:
    """Third-party imports that are not declared (tests may use the test extra, the code only [project]),
    import names without a distribution, and declared distributions nothing uses."""
    problems, used = [], set()
    for file, names in sorted(by_file.items()):
        is_test = file.startswith("tests/")
        for name in sorted(names - local - set(sys.stdlib_module_names)):
            dist = DISTRIBUTION.get(name)
            if dist is None:
                problems.append(f"{file}: imports {name}, which is neither stdlib, first-party nor in DISTRIBUTION")
                continue
            used.add(dist)
            if dist not in floors:
                problems.append(f"{file}: imports {name} ({dist}), not declared in pyproject.toml")
            elif floors[dist]["group"] != "project" and not is_test:
                problems.append(f"{file}: imports {name} ({dist}), declared only in the {floors[dist]['group']} extra")
    for dist in sorted(set(floors) - used - set(NOT_IMPORTED)):
        problems.append(f"{dist}: declared in pyproject.toml but imported nowhere "
                        "(remove it, or say why in NOT_IMPORTED)")
    return problems


@pytest.fixture(scope="module")
def floors() -> dict[str, dict]:
    return declared((ROOT / "pyproject.toml").read_text())


def test_every_declared_dependency_is_pinned_at_or_above_its_floor(floors):
    pinned = pins((ROOT / "constraints.txt").read_text())
    assert not pin_problems(floors, pinned), "\n".join(pin_problems(floors, pinned))
    assert "concept-repro" not in pinned, "constraints.txt pins this package itself"


def test_the_constraints_pin_the_torch_the_makefile_installs():
    pinned = pins((ROOT / "constraints.txt").read_text())
    spec = re.search(r"^TORCH_SPEC\s*\?=\s*torch==(\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert spec, "Makefile: TORCH_SPEC ?= torch==VERSION"
    assert pinned["torch"] == spec.group(1), (pinned["torch"], spec.group(1))


def test_make_installs_with_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^CONSTRAINTS\s*\?=\s*constraints\.txt$", makefile, re.M)
    stamp = re.search(r"^\$\(STAMP\):(.*)$", makefile, re.M)
    assert stamp and "$(CONSTRAINTS)" in stamp.group(1), "the venv stamp must depend on the constraints"
    assert re.search(r"pip install .*-c \$\(CONSTRAINTS\).* -e \"\.\[test\]\"", makefile)


def test_the_running_environment_satisfies_every_floor(floors):
    problems = []
    for name, spec in floors.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name}: not installed")
            continue
        if not at_least(version, spec["floor"]):
            problems.append(f"{name}: {version} installed, floor {spec['floor']}")
        for extra in spec["extras"]:  # e.g. lm-eval[hf]: accelerate, peft, ...
            for requirement in metadata.requires(name) or []:
                if re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", requirement):
                    needed = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group(0)
                    try:
                        metadata.version(needed)
                    except metadata.PackageNotFoundError:
                        problems.append(f"{name}[{extra}]: {needed} not installed")
    assert not problems, "\n".join(problems)


def test_every_import_is_a_declared_dependency_and_every_dependency_is_imported(floors):
    by_file = {str(path.relative_to(ROOT)): imported(path) for path in sources()}
    assert "evals/harness/adapter.py" in by_file and "workflows/data.smk" in by_file and "Snakefile" in by_file
    problems = import_problems(by_file, floors, first_party())
    assert not problems, "\n".join(problems)
    assert not set(DISTRIBUTION) - set().union(*by_file.values()), "DISTRIBUTION names modules nothing imports"


def test_no_rule_declares_a_conda_environment():
    """Rules run the interpreter that runs Snakemake ($REPRO_PYTHON, the venv `make` builds): a `conda:`
    directive would name an environment that nothing builds or tests."""
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflows").glob("*.smk"))]
    offenders = [f"{path.name}:{n}" for path in files for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.match(r"\s*conda\s*:", line)]
    assert not offenders, offenders
    assert not list((ROOT / "workflows").glob("envs/*.y*ml"))


# the checks above can fail: each helper on a case that must be reported

def test_the_checks_report_what_they_should():
    floors = declared('[project]\ndependencies = [\n  "torch>=2.13",\n  "lm-eval[hf]>=0.4.10",\n]\n'
                      '[project.optional-dependencies]\ntest = ["pytest>=8.0"]\n[tool.x]\n')
    assert floors["lm-eval"] == {"floor": "0.4.10", "extras": ["hf"], "group": "project"}
    assert pin_problems(floors, {"torch": "2.13.0", "lm-eval": "0.4.10", "pytest": "8.0.0"}) == []
    assert pin_problems(floors, {"torch": "2.12.1", "lm-eval": "0.4.9.2"}) == [
        "torch: pinned 2.12.1 below its floor 2.13", "lm-eval: pinned 0.4.9.2 below its floor 0.4.10",
        "pytest: declared (>=8.0) but not pinned in constraints.txt"]
    with pytest.raises(AssertionError, match="not NAME"):
        declared('[project]\ndependencies = ["numpy"]\ntest = []\n')
    with pytest.raises(AssertionError, match="not NAME==VERSION"):
        pins("numpy>=1.26\n")
    problems = import_problems({"evals/x.py": {"torch", "pytest", "json", "models", "pandas", "leftpad"},
                                "tests/test_x.py": {"pytest", "lm_eval"}}, floors, {"models"})
    assert problems == ["evals/x.py: imports leftpad, which is neither stdlib, first-party nor in DISTRIBUTION",
                        "evals/x.py: imports pandas (pandas), not declared in pyproject.toml",
                        "evals/x.py: imports pytest (pytest), declared only in the test extra"]
    assert import_problems({"tests/test_x.py": {"torch"}}, floors, set()) == [
        "lm-eval: declared in pyproject.toml but imported nowhere (remove it, or say why in NOT_IMPORTED)",
        "pytest: declared in pyproject.toml but imported nowhere (remove it, or say why in NOT_IMPORTED)"]
    assert at_least("2.13.0+cpu", "2.13") and not at_least("0.4.9.2", "0.4.10") and at_least("6.0.1", "6.0.1")
