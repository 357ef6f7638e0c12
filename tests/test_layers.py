"""The packages depend one way (README, "Layout"): common -> corpora -> models -> trainer -> evals -> tables ->
reports, with workflows and benchmarks on top; no module imports a later layer, and no modules import each
other in a circle -- counting the imports inside functions, which hide a circle from Python but not from a
reader."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["common", "corpora", "models", "trainer", "evals", "tables", "reports", "workflows", "benchmarks"]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Every module of the layers -> the modules of the layers it imports (anywhere in its body)."""
    modules = {module_name(p): p for layer in LAYERS for p in (ROOT / layer).rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(package[:len(package) - node.level + 1] if node.level else [])
                module = ".".join(part for part in (base, node.module or "") if part)
                found |= {f"{module}.{a.name}" for a in node.names} | {module}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_module_imports_a_later_layer():
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = sorted((m, d) for m, deps in imports().items() for d in deps
                    if rank[d.split(".")[0]] > rank[m.split(".")[0]])
    assert upward == []


def test_no_modules_import_each_other_in_a_circle():
    graph = imports()
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if dep.startswith(node + ".") or node.startswith(dep + "."):
                continue  # a package and its own modules (__init__ re-exports)
            if state.get(dep) == "open":
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


DATA_FOLDERS = {"fixtures", "golden", "__pycache__"}   # test data, not tests


def test_the_test_folders_mirror_the_packages():
    """tests/<package>/<subpackage>/ holds the tests of <package>/<subpackage>/; the top of tests/ holds
    those of the repository as a whole (this file, lint, dependencies, the Makefile)."""
    folders = [p for p in (ROOT / "tests").rglob("*") if p.is_dir() and not DATA_FOLDERS & set(p.parts)]
    strays = sorted(str(p.relative_to(ROOT)) for p in folders
                    if not (ROOT / p.relative_to(ROOT / "tests") / "__init__.py").is_file())
    assert strays == []
