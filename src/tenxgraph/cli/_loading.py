"""Finding a user's graph from ``module.path:attribute`` or ``path/to/file.py:attribute``,
with one clear line (and exit status 4) when the module, file or attribute is not there."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tenxgraph.cli._console import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_USAGE, CliError
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.storage.checkpointer.base import BaseCheckpointer


def load_target(spec: str) -> Any:
    """The object `spec` (``MODULE:ATTRIBUTE``) names; the attribute may be dotted."""
    where, sep, attribute = spec.rpartition(":")
    if not sep or not where or not attribute:
        raise CliError(
            f"Expected MODULE:APP (e.g. myproject.agent:app or path/to/file.py:app), got {spec!r}",
            EXIT_USAGE,
        )
    module = _import_file(where) if _is_path(where) else _import_module(where)
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            graphs = _graph_names(module)
            hint = f" (graphs it has: {', '.join(graphs)})" if graphs else ""
            raise CliError(
                f"{where!r} has no attribute {attribute!r}{hint}", EXIT_NOT_FOUND
            ) from None
    return value


def to_app(value: Any, spec: str, checkpointer: BaseCheckpointer | None = None) -> CompiledGraph:
    """A runnable app from what `spec` named: a compiled graph as it is; a StateGraph (or a
    builder with ``compile()``, like ReactAgent) compiled with `checkpointer`; a function
    without arguments called first."""
    if _is_graph(value):
        return _compiled(value, checkpointer)
    if callable(value) and not inspect.isclass(value):
        try:
            inspect.signature(value).bind()
        except TypeError:
            raise CliError(
                f"{spec} is a function that needs arguments; point at a graph, or at a function "
                "without arguments that returns one",
                EXIT_USAGE,
            ) from None
        except ValueError:  # no signature to read: just call it
            pass
        made = value()
        if _is_graph(made):
            return _compiled(made, checkpointer)
        value = made
    raise CliError(
        f"{spec} is a {type(value).__name__}, not a graph: point at a compiled graph "
        "(graph.compile()), a StateGraph, or a function without arguments returning one",
        EXIT_USAGE,
    )


def _is_graph(value: Any) -> bool:
    if isinstance(value, CompiledGraph | StateGraph):
        return True
    return not inspect.isclass(value) and callable(getattr(value, "compile", None))


def _compiled(value: Any, checkpointer: BaseCheckpointer | None) -> CompiledGraph:
    if isinstance(value, CompiledGraph):
        return value
    app = value.compile(checkpointer=checkpointer)
    if not isinstance(app, CompiledGraph):
        raise CliError(
            f"compile() of {type(value).__name__} returned a {type(app).__name__}, "
            "not a compiled graph",
            EXIT_USAGE,
        )
    return app


def _is_path(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def _import_file(where: str) -> ModuleType:
    path = Path(where).expanduser()
    if not path.is_file():
        raise CliError(f"No file {str(path)!r}", EXIT_NOT_FOUND)
    folder = str(path.resolve().parent)
    if folder not in sys.path:  # so the file can import its neighbours
        sys.path.insert(0, folder)
    name = path.stem if path.stem.isidentifier() else "tenxgraph_user_app"
    if name in sys.modules:
        name = f"{name}_{abs(hash(str(path.resolve()))):x}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"Cannot import {str(path)!r}: not a Python file", EXIT_USAGE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise CliError(f"Importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _import_module(name: str) -> ModuleType:
    if "" not in sys.path and os.getcwd() not in sys.path:  # as `python -m` would
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (name == missing or name.startswith(missing + ".")):
            raise CliError(
                f"No module named {name!r} (run from the folder that holds it, or give a file: "
                "path/to/file.py:app)",
                EXIT_NOT_FOUND,
            ) from None
        raise CliError(f"Importing {name!r} failed: {exc}", EXIT_FAILED) from exc
    except Exception as exc:
        raise CliError(f"Importing {name!r} failed: {type(exc).__name__}: {exc}") from exc


def _graph_names(module: ModuleType) -> list[str]:
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and isinstance(value, CompiledGraph | StateGraph)
    )


__all__ = ["load_target", "to_app"]
