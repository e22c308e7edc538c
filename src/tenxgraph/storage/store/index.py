"""A store's semantic index: what `index={...}` configures, and the embedding calls.

`IndexConfig` has LangGraph's keys: `dims` (the length of every vector), `embed` (what turns
texts into vectors) and `fields` (the field paths of a value to embed, `_paths`; default
`["$"]`, the whole value as JSON). `embed` is one of:

- a function from a list of texts to a list of vectors (lists of floats), sync or async (a
  sync one runs in a worker thread, so a local model does not block the event loop);
- an object with `aembed_documents`/`embed_documents` (and `aembed_query`/`embed_query` for
  search queries), such as a LangChain `Embeddings`;
- a litellm model name, e.g. `"openai/text-embedding-3-small"`: `litellm.aembedding` is
  called (litellm is imported then), with the provider's usual environment variables.

Every answer is checked: one vector per text, each `dims` finite numbers. A failed call or a
wrong answer is an `EmbeddingError` naming the item (or the query), raised before anything is
written.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Required, TypedDict

from tenxgraph.core.exceptions import EmbeddingError
from tenxgraph.core.redaction import scrub_exception
from tenxgraph.storage.store._paths import WHOLE, Path, parse_path, texts_at
from tenxgraph.utils.litellm_import import load_litellm

#: a function from texts to their vectors, sync or async
EmbedFunc = Callable[[list[str]], Sequence[Sequence[float]] | Awaitable[Sequence[Sequence[float]]]]


class IndexConfig(TypedDict, total=False):
    """How a store embeds its items for `asearch(..., query=...)`."""

    dims: Required[int]
    embed: Required[EmbedFunc | str | Any]
    fields: list[str] | None


#: what `aput(..., index=...)` takes: None (the store's fields), False (no vectors) or paths
IndexArg = Literal[False] | list[str] | None


class SemanticIndex:
    """A checked `IndexConfig`: its dims, its field paths and its embedding calls."""

    def __init__(self, config: IndexConfig) -> None:
        if not isinstance(config, dict):
            raise ValueError(
                "index must be a dict such as {'dims': 1536, 'embed': "
                f"'openai/text-embedding-3-small'}}, not {type(config).__name__}"
            )
        unknown = sorted(set(config) - {"dims", "embed", "fields"})
        if unknown:
            raise ValueError(f"index: unknown keys {unknown}; it takes dims, embed and fields")
        dims = config.get("dims")
        if type(dims) is not int or dims < 1:
            raise ValueError(
                f"index: dims must be a positive int (the vectors' length), not {dims!r}"
            )
        self.dims = dims
        self.config = config.copy()
        fields = config.get("fields")
        self.fields = [WHOLE] if fields is None else check_fields(fields, "index: fields")
        self.paths = [parse_path(field) for field in self.fields]
        embed = config.get("embed")
        self._documents, self._query = _callers(embed)
        self._hint = (
            f" Check the model name {embed!r} and the provider's API key (its environment "
            "variable, e.g. OPENAI_API_KEY)."
            if isinstance(embed, str)
            else ""
        )

    def paths_for(self, index: IndexArg) -> list[Path] | None:
        """The paths an `aput(..., index=index)` embeds; None: store no vectors."""
        if index is None:
            return self.paths
        if index is False:
            return None
        return [parse_path(field) for field in check_fields(index, "index")]

    async def embed_values(
        self, values: list[dict[str, Any]], paths: list[Path], what: str
    ) -> list[list[list[float]]]:
        """Each value's vectors, of the texts `paths` reach in it (none: no texts), all
        embedded in one call."""
        texts = [
            [text for path in paths for text in texts_at(value, path) if text.strip()]
            for value in values
        ]
        every = [text for item in texts for text in item]
        if not every:
            return [[] for _ in values]
        vectors = await self._call(self._documents, every, what, "Nothing was written.")
        found: list[list[list[float]]] = []
        start = 0
        for item in texts:
            found.append(vectors[start : start + len(item)])
            start += len(item)
        return found

    async def embed_query(self, query: str) -> list[float]:
        """The vector of a search query."""
        found = await self._call(self._query, [query], "Search query", "Nothing was searched.")
        return list(found[0])

    async def _call(
        self, call: Callable[[list[str]], Awaitable[Any]], texts: list[str], what: str, after: str
    ) -> list[list[float]]:
        try:
            found = await call(texts)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            raise EmbeddingError(
                f"{what}: the embedding function failed on {len(texts)} text(s): "
                f"{type(exc).__name__}: {exc}.{self._hint} {after}",
                context={
                    "where": what,
                    "texts": len(texts),
                    "status_code": status if isinstance(status, int) else None,
                },
            ) from exc
        problem = _problem(found, len(texts), self.dims)
        if problem is not None:
            raise EmbeddingError(
                f"{what}: the embedding function's answer does not fit the index: {problem}. "
                f"{after}",
                context={"where": what, "texts": len(texts), "dims": self.dims},
            )
        return [[float(x) for x in vector] for vector in found]


def check_fields(fields: object, what: str) -> list[str]:
    """`fields` as a list of valid paths, or a `ValueError`."""
    if not isinstance(fields, list) or not fields:
        raise ValueError(
            f"{what} must be a non-empty list of field paths such as ['text', 'meta.title'] "
            f"(or False for no vectors), not {fields!r:.60}"
        )
    for field in fields:
        parse_path(field)
    return list(fields)


def _problem(found: object, count: int, dims: int) -> str | None:
    """What is wrong with an embedding answer, or None."""
    if not isinstance(found, Sequence) or isinstance(found, str | bytes):
        return f"expected a list of {count} vector(s), got {type(found).__name__}"
    if len(found) != count:
        return f"{len(found)} vector(s) for {count} text(s)"
    for n, vector in enumerate(found):
        if not isinstance(vector, Sequence) or isinstance(vector, str | bytes):
            return f"vector {n} is a {type(vector).__name__}, not a list of numbers"
        if len(vector) != dims:
            return (
                f"vector {n} has {len(vector)} numbers but the index's dims is {dims}: set "
                "dims to the embedding model's vector size"
            )
        for x in vector:
            if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
                return f"vector {n} holds {x!r:.40}, not a finite number"
    return None


Caller = Callable[[list[str]], Awaitable[Any]]


def _callers(embed: object) -> tuple[Caller, Caller]:
    """The calls embedding documents and a query, for each form `embed` may take."""
    if isinstance(embed, str):
        if not embed.strip():
            raise ValueError("index: embed is an empty model name")
        if ":" in embed and "/" not in embed:
            provider, _, name = embed.partition(":")
            raise ValueError(
                f"index: embed {embed!r} is LangGraph's 'provider:model' form; litellm, which "
                f"tenxgraph calls, names that model {provider + '/' + name!r}"
            )
        return _litellm(embed), _litellm(embed)
    if hasattr(embed, "aembed_documents") or hasattr(embed, "embed_documents"):
        return _method(embed, "documents"), _method(embed, "query")
    if not callable(embed):
        raise ValueError(
            "index: embed must be a function from a list of texts to a list of vectors "
            "(sync or async), an object with embed_documents, or a litellm model name such "
            f"as 'openai/text-embedding-3-small'; got {type(embed).__name__}"
        )
    return _function(embed), _function(embed)


def _function(embed: Callable[..., Any]) -> Caller:
    is_async = inspect.iscoroutinefunction(embed) or inspect.iscoroutinefunction(
        type(embed).__call__  # an object with an async __call__
    )

    async def call(texts: list[str]) -> Any:
        found = await embed(texts) if is_async else await asyncio.to_thread(embed, texts)
        return await found if inspect.isawaitable(found) else found

    return call


def _method(embed: Any, kind: str) -> Caller:
    """LangChain's `Embeddings` shape: `aembed_documents(texts)`, `aembed_query(text)`, or
    their sync forms (run in a worker thread)."""

    async def call(texts: list[str]) -> Any:
        if kind == "documents":
            if hasattr(embed, "aembed_documents"):
                return await embed.aembed_documents(texts)
            return await asyncio.to_thread(embed.embed_documents, texts)
        if hasattr(embed, "aembed_query"):
            return [await embed.aembed_query(texts[0])]
        if hasattr(embed, "embed_query"):
            return [await asyncio.to_thread(embed.embed_query, texts[0])]
        return await _method(embed, "documents")(texts)

    return call


def _litellm(model: str) -> Caller:
    async def call(texts: list[str]) -> Any:
        litellm = load_litellm()
        try:
            response = await litellm.aembedding(model=model, input=texts)
        except Exception as exc:
            scrub_exception(exc)  # the cause a traceback prints shows no key
            raise
        data = sorted(response.data, key=lambda entry: entry["index"])
        return [entry["embedding"] for entry in data]

    return call


__all__ = ["EmbedFunc", "IndexArg", "IndexConfig", "SemanticIndex", "check_fields"]
