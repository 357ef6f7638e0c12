"""Schema validation with errors that name the file, the line and the field.

Bad input stops the build: every loader raises
:class:`DataError` pointing at the offending place instead of guessing.
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from common.errors import ReproError

SCHEMAS = Path(__file__).resolve().parent / "schemas"
ROOT = Path(__file__).resolve().parents[1]


class DataError(ReproError, ValueError):
    """Malformed reported data, spec or claim; the message says where and what."""

    def __init__(self, path: Path | str, line: int | None, field: str, message: str):
        self.path, self.line, self.field = str(path), line, field
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: field '{field}': {message}")


def display_path(path: Path) -> str:
    """``path`` relative to the repository root when it lies inside it, else as given."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


@cache
def schema(name: str) -> dict:
    """A schema from ``tables/schemas/`` (or any other path) by file name."""
    path = Path(name) if Path(name).is_absolute() else SCHEMAS / name
    return json.loads(path.read_text())


def validate(data: Any, schema_doc: dict, path: Path, line_of=lambda _path: None) -> None:
    """Raise DataError for the first schema violation, located with ``line_of``."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema_doc).iter_errors(data))
    if error is not None:
        location = list(error.absolute_path)
        field = ".".join(str(part) for part in location) or "(top level)"
        raise DataError(path, line_of(location), field, error.message)


def load_yaml(path: Path, schema_doc: dict) -> Any:
    """Load a YAML file and validate it; errors carry the YAML line of the bad field."""
    text = path.read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise DataError(path, mark.line + 1 if mark else None, "(syntax)", str(error)) from error
    validate(data, schema_doc, path, lambda location: yaml_line(text, location))
    return data


def yaml_line(text: str, location: list) -> int | None:
    """1-based line of the node at ``location`` (keys and indices) in a YAML document."""
    node = yaml.compose(text)
    line = node.start_mark.line + 1 if node else None
    for part in location:
        if isinstance(node, yaml.MappingNode):
            node = next((value for key, value in node.value if key.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            node = None
        if node is None:
            break
        line = node.start_mark.line + 1
    return line
