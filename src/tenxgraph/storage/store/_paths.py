"""Field paths: which parts of a stored value a semantic index embeds.

A path names fields from the value's top: `"text"`, `"meta.title"` (a field of a field),
`"notes[0]"` or `"notes[-1]"` (an element of a list), `"notes[*]"` (every element, each its
own text), `"notes[*].body"`; `"$"` is the whole value. What a path reaches becomes text: a
str as it is, anything else as its JSON. A path that reaches nothing gives no text.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: one step of a path: a field name, a list index, or every element of a list (`EVERY`)
Step = str | int
EVERY = -(2**63)  # no real index: a list that long cannot exist
Path = tuple[Step, ...]

WHOLE = "$"
_FIRST = re.compile(r"[^.\[\]]+")
_NEXT = re.compile(r"\.([^.\[\]]+)|\[(-?\d+|\*)\]")


def parse_path(path: object) -> Path:
    """The steps of `path`, or a `ValueError` saying what is wrong with it."""
    if not isinstance(path, str) or not path:
        raise ValueError(
            f"a field path is a non-empty str such as 'text', 'meta.title', 'notes[*].body' "
            f"or '$' (the whole value), not {path!r:.60}"
        )
    if path == WHOLE:
        return ()
    first = _FIRST.match(path)
    if first is None:
        raise ValueError(f"field path {path!r:.80} must start with a field name")
    steps: list[Step] = [first.group()]
    pos = first.end()
    while pos < len(path):
        found = _NEXT.match(path, pos)
        if found is None:
            raise ValueError(
                f"field path {path!r:.80}: cannot read it from {path[pos:]!r:.40}; use "
                "'.name' for a field, '[2]' or '[-1]' for a list element, '[*]' for all"
            )
        name, index = found.groups()
        steps.append(name if name is not None else EVERY if index == "*" else int(index))
        pos = found.end()
    return tuple(steps)


def texts_at(value: Any, path: Path) -> list[str]:
    """The texts `path` reaches in `value` (none when it reaches nothing)."""
    if not path:
        return [value] if isinstance(value, str) else [_json(value)]
    step, rest = path[0], path[1:]
    if isinstance(step, str):
        if isinstance(value, dict) and step in value:
            return texts_at(value[step], rest)
        return []
    if not isinstance(value, list):
        return []
    if step == EVERY:
        return [text for element in value for text in texts_at(element, rest)]
    if -len(value) <= step < len(value):
        return texts_at(value[step], rest)
    return []


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


__all__ = ["EVERY", "WHOLE", "Path", "Step", "parse_path", "texts_at"]
