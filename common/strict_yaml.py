"""YAML read strictly: a key given twice in one mapping is an error (YAML itself keeps the last silently).
The one strict reader of the profiles (``workflows.load``) and of the docs' quote registry (``reports.quotes``)."""
from __future__ import annotations

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} appears twice in one mapping",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def yaml_problem(error: yaml.YAMLError) -> str:
    """"line 3, column 5: key 'a' appears twice in one mapping": where and what, in one line."""
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return where + (getattr(error, "problem", None) or str(error).splitlines()[0])
