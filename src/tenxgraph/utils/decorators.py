"""`@tool`: describe a function as a tool (name, description, tags, whether a person must
approve each call) without wrapping it.

The function stays the same object and is called as before; the metadata sits in an attribute
that `tool_spec` reads when it builds the schema. Only the standard library is imported here, so
`import tenxgraph.utils` stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

TOOL_ATTRIBUTE = "__tenxgraph_tool__"

# The rule the model providers (OpenAI, Anthropic, Gemini) apply to function names.
_NAME_RULE = re.compile(r"[a-zA-Z0-9_-]{1,64}")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """What `@tool` attached: each field overrides what `tool_spec` would infer (None: infer)."""

    name: str | None = None
    description: str | None = None
    tags: frozenset[str] = frozenset()
    requires_approval: bool = False


def check_tool_name(name: str, where: str) -> str:
    """`name` if the providers accept it as a function name, else a ValueError saying `where`."""
    if not isinstance(name, str) or _NAME_RULE.fullmatch(name) is None:
        raise ValueError(
            f"invalid tool name {name!r} ({where}): tool names must match "
            "^[a-zA-Z0-9_-]{1,64}$ (the model providers' rule); pass @tool(name=...)"
        )
    return name


def _tags(tags: Iterable[str] | None) -> frozenset[str]:
    if tags is None:
        return frozenset()
    if isinstance(tags, str | bytes):  # a bare str would become a set of its characters
        raise TypeError(f"@tool(tags=...) takes an iterable of str such as [{tags!r}], not a str")
    try:
        result = frozenset(tags)
    except TypeError:
        raise TypeError(f"@tool(tags=...) takes an iterable of str, got {tags!r}") from None
    bad = [tag for tag in result if not isinstance(tag, str)]
    if bad:
        raise TypeError(f"@tool(tags=...) takes str tags, got {bad!r}")
    return result


def _attach(func: F, info: ToolInfo) -> F:
    if not callable(func):
        raise TypeError(f"@tool decorates a function or callable object, got {func!r}")
    try:
        setattr(func, TOOL_ATTRIBUTE, info)
    except (AttributeError, TypeError):  # bound methods, builtins, __slots__ instances
        raise TypeError(
            f"@tool cannot attach its metadata to {func!r}; decorate the function itself "
            "(for a method: in the class body)"
        ) from None
    return func


@overload
def tool(
    func: F,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    requires_approval: bool = False,
) -> F: ...


@overload
def tool(
    func: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    requires_approval: bool = False,
) -> Callable[[F], F]: ...


def tool(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    tags: Iterable[str] | None = None,
    requires_approval: bool = False,
) -> F | Callable[[F], F]:
    """Mark `func` as a tool, as `@tool` or `@tool(name=..., description=..., tags=...)`.

    With `requires_approval=True`, a `ToolNode` pauses the run before each call of the tool
    until a person approves, edits or rejects it (see `ToolNode`).

    Returns `func` itself: the metadata is stored in `func.__tenxgraph_tool__` (a `ToolInfo`),
    so sync and async functions keep working unchanged. Errors surface at decoration time.
    """
    if isinstance(func, str):
        raise TypeError(f"@tool takes the name as a keyword: @tool(name={func!r})")
    if name is not None:
        check_tool_name(name, "@tool(name=...)")
    if description is not None and not isinstance(description, str):
        raise TypeError(f"@tool(description=...) takes a str, got {description!r}")
    if not isinstance(requires_approval, bool):
        raise TypeError(
            f"@tool(requires_approval=...) takes True or False, got {requires_approval!r}"
        )
    info = ToolInfo(
        name=name,
        description=description,
        tags=_tags(tags),
        requires_approval=requires_approval,
    )
    if func is None:
        return lambda f: _attach(f, info)
    return _attach(func, info)


__all__ = ["TOOL_ATTRIBUTE", "ToolInfo", "check_tool_name", "tool"]
