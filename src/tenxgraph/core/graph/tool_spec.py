"""`ToolSpec`: what the model is told about a tool, and how the model's arguments are checked.

Built once per function from its signature, type hints and docstring (`@tool` metadata wins).
The JSON schema comes from pydantic, then is cleaned into what every provider accepts: no
titles, no `$defs` (inlined), an object with `required` and `additionalProperties: false`.
"""

from __future__ import annotations

import functools
import inspect
import typing
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticInvalidForJsonSchema,
    PydanticSchemaGenerationError,
    PydanticUserError,
    TypeAdapter,
    create_model,
)
from pydantic.fields import FieldInfo

from tenxgraph.core.graph.tool_docs import read_docs
from tenxgraph.utils.decorators import TOOL_ATTRIBUTE, ToolInfo, check_tool_name

# filled by the runtime, not the model (`store`: the graph's long-term store)
INJECTED = frozenset({"state", "config", "store", "tool_call_id", "idempotency_key"})


@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class ToolSpec:
    """A tool as the runtime sees it. Specs are shared (cached): treat `schema` as read-only."""

    name: str
    description: str
    func: Callable[..., Any]
    is_async: bool
    tags: frozenset[str]
    requires_approval: bool  # from @tool(requires_approval=True); a ToolNode may add its own
    injected: frozenset[str]  # the INJECTED parameters `func` takes; the caller passes them
    schema: dict[str, Any] = field(repr=False)  # OpenAI format: {"type": "function", ...}
    _model: type[BaseModel] | None = field(repr=False)  # None: the arguments go as they are
    _params: tuple[str, ...] = field(repr=False)  # parameter names; model field i is f"p{i}"

    @classmethod
    def from_schema(
        cls,
        name: str,
        parameters: dict[str, Any],
        func: Callable[..., Any],
        *,
        description: str = "",
        tags: frozenset[str] = frozenset(),
        requires_approval: bool = False,
    ) -> ToolSpec:
        """A tool described by a JSON schema instead of a Python signature (a remote tool:
        an MCP server's, say). `parameters` is shown to the model as given; `func` is called
        with the model's arguments as keywords, unchecked (the side that owns the schema
        checks them). `func` takes no injected parameters."""
        name = check_tool_name(name, f"tool {func!r}")
        if not isinstance(parameters, dict):
            raise TypeError(f"tool {name!r}: parameters must be a JSON schema (a dict)")
        routine = _routine(func)
        return cls(
            name=name,
            description=description,
            func=func,
            is_async=inspect.iscoroutinefunction(routine)
            or inspect.iscoroutinefunction(inspect.unwrap(routine)),
            tags=frozenset(tags),
            requires_approval=requires_approval,
            injected=frozenset(),
            schema={
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            },
            _model=None,
            _params=(),
        )

    def __call__(self, **kwargs: Any) -> Any:
        """Call the tool's function: a spec can stand where a tool function is expected."""
        return self.func(**kwargs)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments to call `func` with: `args` (from the model) validated and
        converted (models, enums), defaults filled, unknown names refused. A spec built
        `from_schema` passes `args` on unchanged.

        Raises pydantic.ValidationError; its message names each offending parameter, so the
        caller can hand it back to the model.
        """
        if self._model is None:
            return dict(args)
        values = self._model.model_validate(args)
        return {param: getattr(values, f"p{i}") for i, param in enumerate(self._params)}


_NO_SCHEMA = (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema)
Param = tuple[str, Any, Any]  # (name, annotation, default or ... when required)


@dataclass(slots=True)
class _Entry:
    parts: dict[str, Any]  # every ToolSpec field but `func`: none refers to the function
    spec: weakref.ref[ToolSpec] | None = None


# Keyed weakly by the function; the values never refer to it, so an entry dies with its function.
_CACHE: weakref.WeakKeyDictionary[Any, _Entry] = weakref.WeakKeyDictionary()


def tool_spec(func: Callable[..., Any]) -> ToolSpec:
    """The `ToolSpec` of `func`: a function, method, functools.partial or callable object.

    The work (schema, validator) is done once per function object; while a spec is alive, the
    same spec is returned. Objects that cannot be weak-referenced or hashed are not cached.
    A `ToolSpec` is its own spec.
    """
    if isinstance(func, ToolSpec):
        return func
    try:
        entry = _CACHE.get(func)
    except TypeError:
        return ToolSpec(func=func, **_build(func))
    if entry is None:
        entry = _CACHE[func] = _Entry(_build(func))
    spec = entry.spec() if entry.spec is not None else None
    if spec is None or spec.func is not func:  # `is`: an equal but distinct key shares parts
        spec = ToolSpec(func=func, **entry.parts)
        entry.spec = weakref.ref(spec)
    return spec


def _unpartial(func: Any) -> tuple[Any, set[str]]:
    """What `func` wraps if it is a partial, and the keywords the partial sets."""
    bound: set[str] = set()
    while isinstance(func, functools.partial):
        bound.update(func.keywords)
        func = func.func
    return func, bound


def _routine(func: Any) -> Any:
    """The function whose hints, docstring and async-ness describe calling `func`."""
    target = _unpartial(func)[0]
    return target if inspect.isroutine(target) else type(target).__call__


def _info(func: Any) -> ToolInfo:
    """The `@tool` metadata on `func`, on what a partial wraps, or on `__call__`."""
    for candidate in (func, _unpartial(func)[0], _routine(func)):
        info = getattr(candidate, TOOL_ATTRIBUTE, None)
        if isinstance(info, ToolInfo):
            return info
    return ToolInfo()


def _build(func: Any) -> dict[str, Any]:
    if inspect.isclass(func) or not callable(func):
        raise TypeError(f"a tool is a function or a callable object (an instance), got {func!r}")
    info, (target, bound) = _info(func), _unpartial(func)
    default_name = getattr(target, "__name__", None)
    if not isinstance(default_name, str):  # a callable object: its class name
        default_name = type(target).__name__.lower()
    name = check_tool_name(info.name or default_name, f"tool {func!r}")
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tool {name!r}: cannot read the signature of {func!r} ({exc})") from None
    routine = _routine(func)
    try:
        hints = typing.get_type_hints(routine, include_extras=True)
    except Exception as exc:  # unresolved forward references, malformed annotations
        raise TypeError(f"tool {name!r}: cannot resolve its type hints ({exc})") from exc
    params: list[Param] = []
    injected: set[str] = set()
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            shown = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(
                p.kind.name, "positional-only "
            )
            raise TypeError(
                f"tool {name!r}: {shown}{p.name} is not supported; a tool takes named parameters "
                "(called by keyword), which its schema lists for the model"
            )
        if p.name in INJECTED and p.name not in bound:
            injected.add(p.name)
        elif p.name not in bound:  # a partial's keywords are set already: hidden from the model
            default = ... if p.default is p.empty else p.default
            params.append((p.name, hints.get(p.name, Any), default))
    model, raw, params = _model(name, params)
    summary, arg_docs = read_docs(target)
    description = info.description if info.description is not None else summary
    parameters = _clean_schema(raw, arg_docs)
    schema = {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }
    unwrapped = inspect.unwrap(routine)
    return {
        "name": name,
        "description": description,
        "is_async": inspect.iscoroutinefunction(routine) or inspect.iscoroutinefunction(unwrapped),
        "tags": info.tags,
        "requires_approval": info.requires_approval,
        "injected": frozenset(injected),
        "schema": schema,
        "_model": model,
        "_params": tuple(p[0] for p in params),
    }


def _model(name: str, params: list[Param]) -> tuple[type[BaseModel], dict[str, Any], list[Param]]:
    """The arguments model, its JSON schema, and the parameters it covers.

    Fields are named p0, p1... and aliased to the parameter names, so any name works (`schema`,
    `model_config`, `_private` would clash with pydantic's). An optional parameter whose type has
    no JSON schema (a client, a callable: pydantic says so with _NO_SCHEMA) is left out: the model
    cannot send it, the function keeps its default. A required one is an error.
    """
    try:
        return (*_create(name, params), params)
    except PydanticUserError as exc:
        error = exc
    kept = []
    for param in params:
        pname, annotation, default = param
        try:
            TypeAdapter(annotation).json_schema()
        except PydanticUserError as exc:
            required = default is ... or (isinstance(default, FieldInfo) and default.is_required())
            if required or not isinstance(exc, _NO_SCHEMA):
                raise TypeError(
                    f"tool {name!r}: parameter {pname!r} has type {annotation!r}, which cannot "
                    f"be turned into a JSON schema for the model ({exc}); use a JSON-compatible "
                    "type (an optional parameter of a type with no schema is hidden instead)"
                ) from exc
            continue
        kept.append(param)
    if len(kept) == len(params):
        raise TypeError(f"tool {name!r}: cannot build its arguments schema ({error})") from error
    return (*_create(name, kept), kept)


def _create(name: str, params: list[Param]) -> tuple[type[BaseModel], dict[str, Any]]:
    fields: dict[str, Any] = {  # the alias in Annotated: a Field() default keeps its own say
        f"p{i}": (Annotated[annotation, Field(alias=pname)], default)
        for i, (pname, annotation, default) in enumerate(params)
    }
    model = create_model(name, __config__=ConfigDict(extra="forbid"), **fields)
    return model, model.model_json_schema()


# Keywords whose value is a schema / a mapping of name -> schema / a list of schemas: the only
# places a cleaner may look inside (a property may be called "title"; a default may hold one).
_ONE = {"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"}
_MAP = {"properties", "patternProperties", "dependentSchemas"}
_LIST = {"anyOf", "oneOf", "allOf", "prefixItems"}
_DEFS = "#/$defs/"


def _clean_schema(raw: dict[str, Any], arg_docs: dict[str, str]) -> dict[str, Any]:
    """Pydantic's schema for the arguments, as providers take it (see the module docstring)."""
    defs: dict[str, Any] = raw.get("$defs", {})
    kept: set[str] = set()  # recursive definitions: they stay in $defs
    properties = {}
    for pname, prop in raw.get("properties", {}).items():
        if pname in arg_docs and "description" not in prop:  # explicit Field(description) wins
            prop = {**prop, "description": arg_docs[pname]}  # before inlining: beats a class doc
        properties[pname] = _clean(prop, defs, (), kept)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(raw.get("required", [])),
        "additionalProperties": False,
    }
    done: dict[str, Any] = {}
    while pending := sorted(kept - done.keys()):
        done[pending[0]] = _clean(defs[pending[0]], defs, (pending[0],), kept)
    if done:
        schema["$defs"] = dict(sorted(done.items()))
    return schema


def _clean(node: Any, defs: dict[str, Any], stack: tuple[str, ...], kept: set[str]) -> Any:
    """`node` without titles, with references to `defs` inlined except recursive ones."""
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS) and ref[len(_DEFS) :] in defs:
        key = ref[len(_DEFS) :]
        if key in stack:
            kept.add(key)
        else:  # the node's other keys (description, default) override the definition's
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {
                **_clean(defs[key], defs, (*stack, key), kept),
                **_clean(rest, defs, stack, kept),
            }
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "discriminator"):  # discriminator: OpenAPI, its mapping names $defs
            continue
        if key in _ONE:
            out[key] = _clean(value, defs, stack, kept)
        elif key in _MAP and isinstance(value, dict):
            out[key] = {k: _clean(v, defs, stack, kept) for k, v in value.items()}
        elif key in _LIST and isinstance(value, list):
            out[key] = [_clean(v, defs, stack, kept) for v in value]
        else:
            out[key] = value
    only = out.get("allOf")
    if isinstance(only, list) and len(only) == 1 and isinstance(only[0], dict):
        del out["allOf"]  # older pydantic's way to give a $ref siblings
        out = {**only[0], **out}
    return out


__all__ = ["INJECTED", "ToolSpec", "tool_spec"]
