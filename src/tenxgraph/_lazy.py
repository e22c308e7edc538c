"""Module attributes imported on first use, so importing a package stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_getattr(
    module_name: str, namespace: dict[str, Any], sources: dict[str, str]
) -> Callable[[str], Any]:
    """A module `__getattr__` that imports `name` from `sources[name]` when first asked for
    and keeps it in `namespace` (the module's globals)."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    return __getattr__
