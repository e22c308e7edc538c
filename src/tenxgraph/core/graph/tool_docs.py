"""What a tool's docstring says: its summary, and the text of each parameter, in Google
("Args:"), Sphinx (":param x:") or NumPy ("Parameters" underlined) style."""

from __future__ import annotations

import inspect
import re
from typing import Any

# Docstrings: a summary, then sections. Google ("Args:"), Sphinx (":param x:"), NumPy (a header
# underlined with dashes) give the per-argument text.
_GOOGLE = r"args|arguments|parameters|params|keyword args|keyword arguments|other parameters"
_GOOGLE_ARGS = re.compile(rf"(?i)({_GOOGLE})\s*:")
_GOOGLE_ANY = re.compile(
    rf"(?i)({_GOOGLE}|returns?|yields?|raises|examples?|notes?|attributes|see also|warnings?"
    r"|references|todo)\s*:"
)
_GOOGLE_ENTRY = re.compile(r"\*{0,2}(?P<names>\w+)\s*(?:\([^)]*\))?\s*:(?P<text>.*)")
_SPHINX_FIELD = re.compile(r":\w+(?:\s+[^:]+)?:")
_SPHINX_PARAM = re.compile(  # ":param name:" or ":param type name:"
    r":(?:param|parameter|arg|argument|key|keyword)\s+"
    r"(?:[^:]*\s)?\*{0,2}(?P<names>\w+)\s*:(?P<text>.*)"
)
_NUMPY_ENTRY = re.compile(r"(?P<names>\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?")
_DASHES = re.compile(r"\s*-{3,}\s*")


def read_docs(target: Any) -> tuple[str, dict[str, str]]:
    """(summary, {parameter: text}) from the docstrings of `target`, most specific first (for a
    callable object: `__call__`, then the class)."""
    if inspect.isroutine(target):
        docs = [inspect.getdoc(target)]
    else:
        docs = [inspect.getdoc(type(target).__call__), inspect.getdoc(type(target))]
    summary, found = "", dict[str, str]()
    for doc in docs:
        lines = (doc or "").splitlines()
        end = next((i for i in range(len(lines)) if _is_section(lines, i)), len(lines))
        summary = summary or " ".join(" ".join(lines[:end]).split())
        found = {**_arg_docs(lines), **found}
    return summary, found


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _underlined(lines: list[str], i: int) -> bool:
    return bool(lines[i].strip()) and i + 1 < len(lines) and bool(_DASHES.fullmatch(lines[i + 1]))


def _is_section(lines: list[str], i: int) -> bool:
    text = lines[i].strip()
    return bool(_GOOGLE_ANY.fullmatch(text) or _SPHINX_FIELD.match(text) or _underlined(lines, i))


def _arg_docs(lines: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    for i, line in enumerate(lines):
        text = line.strip()
        if _GOOGLE_ARGS.fullmatch(text):
            _entries(lines, i + 1, _indent(line) + 1, _GOOGLE_ENTRY, found)
        elif _underlined(lines, i) and text.lower() in ("parameters", "other parameters"):
            _entries(lines, i + 2, _indent(line), _NUMPY_ENTRY, found)
        elif _SPHINX_PARAM.fullmatch(text):  # a field list: entries at this indent
            _entries(lines, i, _indent(line), _SPHINX_PARAM, found)
    return {name: " ".join(" ".join(parts).split()) for name, parts in found.items()}


def _entries(
    lines: list[str],
    start: int,
    min_indent: int,
    entry: re.Pattern[str],
    found: dict[str, list[str]],
) -> None:
    """Entries from `start` until a line less indented than `min_indent` (or a NumPy header):
    entry lines, each continued by deeper lines. A name documented twice keeps its first text."""
    entry_indent: int | None = None
    parts: list[str] = []
    for i in range(start, len(lines)):
        text, indent = lines[i].strip(), _indent(lines[i])
        if not text:
            continue
        if indent < min_indent or _underlined(lines, i):
            return
        entry_indent = indent if entry_indent is None else entry_indent
        if indent > entry_indent:
            parts.append(text)
            continue
        match = entry.fullmatch(text)
        parts = [match.groupdict().get("text") or ""] if match else []
        for name in match["names"].split(",") if match else ():
            found.setdefault(name.strip().lstrip("*"), parts)


__all__ = ["read_docs"]
