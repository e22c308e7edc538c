"""litellm's answers -> our `Message`s: whole responses, and streams assembled chunk by chunk.

Pure functions over litellm's OpenAI-shaped objects; they never import litellm themselves.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from tenxgraph.core.state import Message, TokenUsages
from tenxgraph.core.state._construct import _SCALARS, assemble, copied, template, trusted
from tenxgraph.core.state.message import _new_id, _text_block, _text_message, generate_id
from tenxgraph.core.state.message_block import (
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
)
from tenxgraph.core.state.sealed import JSON_DEPTH, FrozenDict, FrozenList, SealedJSON, untracker

# `ReasoningBlock.details` marker of an encrypted (redacted) thinking block; its data is kept in
# `signature` and sent back as it came
REDACTED_THINKING = "redacted_thinking"

# keys that may carry a credential; never kept in `Message.raw`
_SECRET_KEYS = frozenset(
    {"authorization", "api_key", "api-key", "x-api-key", "x-goog-api-key", "proxy-authorization"}
)


def message_from_response(
    response: Any, provider: str | None, model: str, response_cost: float | None = None
) -> Message:
    """A complete assistant `Message` from a litellm `ModelResponse` (or its dict)."""
    raw = sealed_raw(_dumped(response))
    choices = raw.get("choices")
    choice = choices[0] if choices else {}
    wire = choice.get("message") or {}
    fingerprint = raw.get("system_fingerprint")
    reasoning = wire.get("reasoning_content")
    if not (reasoning and isinstance(reasoning, str)):
        reasoning = wire.get("reasoning")
        if not isinstance(reasoning, str):
            reasoning = ""
    if wire.get("thinking_blocks") or wire.get("tool_calls"):
        extra = {"system_fingerprint": fingerprint} if fingerprint else {}
        return _drafted(raw, choice, wire, reasoning, extra, provider, model, response_cost)
    # the usual answer, text (and reasoning) only: built straight, it is on every model call
    content = wire.get("content")
    text = content if isinstance(content, str) else _text_of(content)
    blocks: list[ContentBlock] = []
    if reasoning:
        blocks.append(trusted(ReasoningBlock, summary=reasoning))
    if text:
        blocks.append(_text_block(text))
    metadata: dict[str, Any] = {  # as `_metadata` makes it
        "provider": provider,
        "model": raw.get("model") or model,
        "finish_reason": choice.get("finish_reason"),
        "response_id": raw.get("id"),
    }
    if response_cost is not None:
        metadata["cost"] = response_cost
    if fingerprint:
        metadata["system_fingerprint"] = fingerprint
    fields = _ANSWER.copy()
    fields["message_id"] = _new_id()
    fields["content"] = blocks
    fields["reasoning"] = reasoning or None
    fields["timestamp"] = time.time()
    fields["metadata"] = metadata
    fields["usages"] = token_usages(raw.get("usage"))
    fields["raw"] = raw
    return assemble(Message, fields, set(_ANSWER_SET))


_ANSWER = template(Message, message_id="", role="assistant", content=[])
_ANSWER_SET = frozenset(
    {"message_id", "role", "content", "tools_calls", "reasoning", "metadata", "usages", "raw"}
)


def _drafted(
    raw: dict[str, Any],
    choice: dict[str, Any],
    wire: dict[str, Any],
    reasoning: str,
    extra: dict[str, Any],
    provider: str | None,
    model: str,
    response_cost: float | None,
) -> Message:
    """An answer with thinking blocks or tool calls, put together by a `Draft`."""
    draft = Draft(response_id=raw.get("id"), model=raw.get("model") or model)
    draft.finish_reason = choice.get("finish_reason")
    draft.text = _text_of(wire.get("content"))
    draft.reasoning = reasoning
    for position, block in enumerate(wire.get("thinking_blocks") or ()):
        if block.get("type") == "redacted_thinking":  # encrypted: only the provider reads it
            draft.add_thinking(position, None, block.get("data"), redacted=True)
        else:
            draft.add_thinking(position, block.get("thinking"), block.get("signature"))
    for position, call in enumerate(wire.get("tool_calls") or ()):
        function = call.get("function") or {}
        draft.add_call_fragment(
            position, call.get("id"), function.get("name"), function.get("arguments")
        )
    draft.usage = raw.get("usage")
    draft.extra.update(extra)
    draft.cost = response_cost
    return draft.build(provider, raw)


def _metadata(
    provider: str | None,
    model: str | None,
    finish_reason: str | None,
    response_id: str | None,
    cost: float | None,
    errors: dict[str, str] | None,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """An answer's `metadata`: where it came from, why it ended, what it cost."""
    metadata: dict[str, Any] = {
        "provider": provider,
        "model": model,
        "finish_reason": finish_reason,
        "response_id": response_id,
    }
    if cost is not None:
        metadata["cost"] = cost
    if errors:
        metadata["tool_call_errors"] = errors
    if extra:
        metadata.update(extra)
    return metadata


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


@dataclass(slots=True)
class _Call:
    id: str | None
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Draft:
    """An assistant message being put together: from a whole response, or chunk by chunk."""

    response_id: str | None = None
    model: str | None = None
    message_id: str | int = field(default_factory=generate_id)
    text: str = ""
    reasoning: str = ""
    thinking: dict[int, list[Any]] = field(default_factory=dict)  # index -> [text, signature]
    redacted: set[int] = field(default_factory=set)  # thinking indexes the provider encrypted
    calls: list[_Call] = field(default_factory=list)
    call_slots: dict[int, int] = field(default_factory=dict)  # provider index -> calls position
    finish_reason: str | None = None
    usage: Any = None
    cost: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def add_thinking(
        self, index: int, text: str | None, signature: str | None, *, redacted: bool = False
    ) -> None:
        if redacted:
            self.redacted.add(index)
        slot = self.thinking.setdefault(index, ["", None])
        if text and isinstance(text, str):
            slot[0] += text
        if signature:
            slot[1] = signature

    def add_call_fragment(
        self, index: int, call_id: str | None, name: str | None, arguments: str | None
    ) -> None:
        """One piece of a tool call. Pieces with the same index belong together, except that
        a new id at a used index starts a new call (some providers send every call whole,
        all at index 0)."""
        position = self.call_slots.get(index)
        if position is None or (call_id and self.calls[position].id not in (None, call_id)):
            position = len(self.calls)
            self.calls.append(_Call(call_id, ""))
            self.call_slots[index] = position
        call = self.calls[position]
        if call_id and call.id is None:
            call.id = call_id
        if name:
            call.name += name
        if arguments:
            call.arguments.append(arguments)

    # -- the finished message ----------------------------------------------------------------

    def build(self, provider: str | None, raw: dict[str, Any] | None = None) -> Message:
        content: list[ContentBlock] = []
        for index, (text, signature) in sorted(self.thinking.items()):
            if index in self.redacted:
                content.append(
                    trusted(
                        ReasoningBlock,
                        summary="",
                        details=[REDACTED_THINKING],
                        signature=_str_or_none(signature),
                    )
                )
            else:
                content.append(
                    trusted(ReasoningBlock, summary=text, signature=_str_or_none(signature))
                )
        if not self.thinking and self.reasoning:
            content.append(trusted(ReasoningBlock, summary=self.reasoning))
        if self.text:
            content.append(trusted(TextBlock, text=self.text))
        tools_calls: list[dict[str, Any]] = []
        errors: dict[str, str] = {}
        for call in self.calls:
            call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
            arguments = "".join(call.arguments)
            args, error = parse_arguments(arguments)
            if error is not None:
                errors[call_id] = error
            content.append(trusted(ToolCallBlock, id=call_id, name=call.name, args=args))
            tools_calls.append(openai_tool_call(call_id, call.name, arguments or "{}"))
        metadata = _metadata(
            provider,
            self.model,
            self.finish_reason,
            self.response_id,
            self.cost,
            errors,
            self.extra,
        )
        reasoning = self.reasoning or "".join(t for t, _ in self.thinking.values()) or None
        # every value here was checked or built above: skip validating it all again
        return trusted(
            Message,
            message_id=self.message_id,
            role="assistant",
            content=content,
            tools_calls=tools_calls or None,
            reasoning=reasoning,
            metadata=metadata,
            usages=token_usages(self.usage),
            raw=raw if raw is not None else self._raw(tools_calls),
        )

    def _raw(self, tools_calls: list[dict[str, Any]]) -> dict[str, Any]:
        """A streamed answer has no single response body; this is the chat.completion it adds
        up to."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if tools_calls:
            message["tool_calls"] = tools_calls
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        return {
            "id": self.response_id,
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "finish_reason": self.finish_reason, "message": message}],
            "usage": _as_dict(self.usage),
        }


def openai_tool_call(call_id: str | None, name: str | None, arguments: str) -> dict[str, Any]:
    """One tool call in the OpenAI chat format (`arguments` is the JSON text)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def parse_arguments(arguments: str | None) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as a dict, or `({}, error)` when they are not a JSON object; the
    error is kept so the tool layer can tell the model what was wrong."""
    if not arguments or not arguments.strip():
        return {}, None
    try:
        value = json.loads(arguments, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {arguments}"
    except (ValueError, RecursionError) as exc:  # NaN/Infinity, absurd nesting or numbers
        return {}, f"arguments are not valid JSON ({exc or type(exc).__name__}): {arguments:.200}"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}: {arguments}"
    return value, None


def _no_constant(name: str) -> Any:
    """JSON has no NaN or Infinity (Python's json reads them; nothing could store them)."""
    raise ValueError(f"{name} is not a JSON value")


def _as_dict(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    return dump() if dump is not None else dict(value)


def token_usages(usage: Any) -> TokenUsages | None:
    """`TokenUsages` from an OpenAI/litellm usage object or dict; cached and cache-write
    prompt tokens, reasoning, image and audio tokens included when the provider reports them."""
    data = usage if isinstance(usage, dict) else _as_dict(usage)
    if not data:
        return None
    fields = _USAGE.copy()
    # a count is an int (not None, a bool or a float); the first place that has it wins: the
    # usage itself, then its prompt details, then its completion details
    for name, key in _USAGE_KEYS:
        value = data.get(key)
        if type(value) is int and value:
            fields[name] = value
    if not _COUNTS_ONLY.issuperset(data):  # the usual report has the three counts only
        for name, key in _CACHE_KEYS:
            value = data.get(key)
            if type(value) is int and value:
                fields[name] = value
    details = data.get("prompt_tokens_details")
    if details:
        _add_counts(fields, details, _PROMPT_DETAIL_KEYS)
    details = data.get("completion_tokens_details")
    if details:
        _add_counts(fields, details, _COMPLETION_DETAIL_KEYS)
    if not fields["total_tokens"]:
        fields["total_tokens"] = fields["prompt_tokens"] + fields["completion_tokens"]
    return assemble(TokenUsages, fields, set(_USAGE))


def _add_counts(fields: dict[str, Any], details: Any, keys: tuple[tuple[str, str], ...]) -> None:
    """The counts of a usage's details (a dict or an object) that no earlier place gave."""
    if not isinstance(details, dict):
        details = _as_dict(details)
        if not details:
            return
    for name, key in keys:
        value = details.get(key)
        if type(value) is int and value and not fields[name]:
            fields[name] = value


_USAGE = template(TokenUsages, prompt_tokens=0, completion_tokens=0, total_tokens=0)
# (field, key) per place a count is read from, in order of preference: the usage itself, its
# prompt details, its completion details
_USAGE_KEYS = (
    ("prompt_tokens", "prompt_tokens"),
    ("completion_tokens", "completion_tokens"),
    ("total_tokens", "total_tokens"),
)
_CACHE_KEYS = (
    ("cache_read_input_tokens", "cache_read_input_tokens"),
    ("cache_creation_input_tokens", "cache_creation_input_tokens"),
)
_COUNTS_ONLY = frozenset(
    {
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "prompt_tokens_details",
        "completion_tokens_details",
    }
)
_PROMPT_DETAIL_KEYS = (
    ("cache_read_input_tokens", "cached_tokens"),
    ("cache_creation_input_tokens", "cache_creation_tokens"),
    ("image_tokens", "image_tokens"),
    ("audio_tokens", "audio_tokens"),
)
_COMPLETION_DETAIL_KEYS = (("reasoning_tokens", "reasoning_tokens"),)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dumped(response: Any) -> dict[str, Any]:
    """A response as a dict. litellm's `ModelResponse.model_dump()` is its serializer with
    `exclude_unset`, called here directly (half the time: no keyword handling on the way)."""
    if isinstance(response, dict):
        return response
    if type(response).__module__ == "litellm.types.utils":
        serializer = getattr(response, "__pydantic_serializer__", None)
        if serializer is not None:
            return serializer.to_python(response, exclude_unset=True)  # type: ignore[no-any-return]
    return response.model_dump()  # type: ignore[no-any-return]


def sealed_raw(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` (a response as a dict) without any key that could hold a credential, as a
    sealed copy marked as plain JSON (`SealedJSON`): one walk, where a scrub, the seal of the
    answer and the save's check would each walk it. A response that is not plain JSON (a
    provider's object in it, a NaN, deeper than `JSON_DEPTH`) is scrubbed only; sealing and
    the save's check then deal with it as with any other value."""
    if type(raw) is not dict:
        return scrub(raw)  # type: ignore[no-any-return]
    dropped: list[Any] = []
    frozen = _json_dict(raw, 1, SealedJSON, untracker(), dropped)
    if frozen is None:
        return scrub(raw)  # type: ignore[no-any-return]
    assert isinstance(frozen, SealedJSON)
    frozen.text = to_json(copied(frozen) if dropped else raw).decode()
    return frozen


_JSON_LEAVES = frozenset({str, int, bool, type(None)})  # floats: checked for NaN one by one


def _json_dict(
    value: dict[Any, Any],
    level: int,
    kind: type[FrozenDict],
    untrack: Callable[[int], None],
    dropped: list[Any],
) -> FrozenDict | None:
    if not _SAFE_KEYS.issuperset(value):  # (it holds str keys only)
        for key in value:
            if type(key) is not str:
                return None
        if any(_is_secret(key) for key in value):
            value = {k: v for k, v in value.items() if not _is_secret(k)}
            dropped.append(True)
    if _JSON_LEAVES.issuperset(map(type, value.values())):  # a leaf: one C-level pass
        frozen = kind(value)
    else:
        if level >= JSON_DEPTH:
            return None
        items: dict[str, Any] = {}
        for key, item in value.items():
            if type(item) not in _JSON_LEAVES:
                item = _json_value(item, level, untrack, dropped)
                if item is _NOT_JSON:
                    return None
            items[key] = item
        frozen = kind(items)
    untrack(id(frozen))  # it holds scalars and untracked trees only
    return frozen


def _json_list(
    value: list[Any], level: int, untrack: Callable[[int], None], dropped: list[Any]
) -> FrozenList | None:
    if _JSON_LEAVES.issuperset(map(type, value)):
        frozen = FrozenList(value)
    else:
        if level >= JSON_DEPTH:
            return None
        items = []
        for item in value:
            if type(item) not in _JSON_LEAVES:
                item = _json_value(item, level, untrack, dropped)
                if item is _NOT_JSON:
                    return None
            items.append(item)
        frozen = FrozenList(items)
    untrack(id(frozen))
    return frozen


_NOT_JSON = object()


def _json_value(item: Any, level: int, untrack: Callable[[int], None], dropped: list[Any]) -> Any:
    """A value that is not a str, int, bool or None, sealed; `_NOT_JSON` if it is not JSON."""
    kind = type(item)
    if kind is float:
        return item if item - item == 0.0 else _NOT_JSON
    if kind is dict:
        found: Any = _json_dict(item, level + 1, FrozenDict, untrack, dropped)
    elif kind is list:
        found = _json_list(item, level + 1, untrack, dropped)
    else:
        return _NOT_JSON
    return _NOT_JSON if found is None else found


def scrub(value: Any) -> Any:
    """`value` without any key that could hold a credential, at any depth. Returned as is
    (no copy) when it has none, which is the usual case."""
    return _scrub(value) if _has_secret(value) else value


# keys seen and known to hold no credential: responses use the same few dozen keys every time,
# so a dict whose keys are all known passes with one set check (bounded, for providers that put
# ids in keys); a key is lower-cased and looked up once. Only str keys are kept, so that a dict
# whose keys all are in it has str keys only (what `sealed_raw` needs to know)
_SAFE_KEYS: set[str] = set()
_MAX_SAFE_KEYS = 4096


def _is_secret(key: Any) -> bool:
    """Whether `key` may hold a credential; each harmless key's verdict is worked out once."""
    if key in _SAFE_KEYS:
        return False
    if not isinstance(key, str):
        return False  # only a name can say it holds a credential
    if key.lower() in _SECRET_KEYS:
        return True
    if type(key) is str and len(_SAFE_KEYS) < _MAX_SAFE_KEYS:
        _SAFE_KEYS.add(key)
    return False


def _has_secret(value: Any) -> bool:
    # a walk of every response; leaves are skipped by their type
    if isinstance(value, dict):
        if not _SAFE_KEYS.issuperset(value) and any(_is_secret(k) for k in value):
            return True
        nested: Any = value.values()
    elif isinstance(value, list):
        nested = value
    else:
        return False
    for v in nested:  # a plain loop: any() over a generator costs more
        if type(v) not in _SCALARS and _has_secret(v):
            break
    else:
        return False
    return True


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if not _is_secret(k)}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def _attr(obj: Any, name: str) -> Any:
    """`getattr(obj, name, None)`, fast for litellm's stream objects: they keep most fields
    in pydantic's extra dict, where a plain getattr of an absent name costs an exception."""
    try:
        fields = obj.__dict__
        if name in fields:
            return fields[name]
        extra = obj.__pydantic_extra__
    except AttributeError:
        return getattr(obj, name, None)
    return extra.get(name) if extra else None


class _Attributes:
    """`.get(name)` as `getattr(obj, name, None)`, for objects that are not pydantic models."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def get(self, name: str) -> Any:
        return getattr(self.obj, name, None)


def _values(obj: Any) -> Any:
    """Something whose `.get(name)` is `_attr(obj, name)`: for a pydantic model, its fields and
    its extra fields (litellm's stream choices and deltas keep most of theirs there) in one
    dict, so that reading several of them costs one merge (or none) rather than a call each."""
    try:
        fields = obj.__dict__
        extra = obj.__pydantic_extra__
    except AttributeError:
        return _Attributes(obj)
    if not extra:
        return fields
    return {**extra, **fields} if fields else extra


class StreamAssembler:
    """Turns litellm stream chunks into `Message(delta=True)` pieces and, at the end, the one
    complete message. Every piece and the final message share one `message_id`."""

    __slots__ = ("_text", "draft", "provider")

    def __init__(self, provider: str | None, model: str) -> None:
        self.draft = Draft(model=model)
        self.provider = provider
        self._text: list[str] = []

    def add(self, chunk: Any) -> Message | None:
        """The delta message for one chunk, or None when it carries nothing to show."""
        draft = self.draft
        if draft.response_id is None:
            draft.response_id = getattr(chunk, "id", None)
            # the provider's name for the model, as a whole response reports it
            draft.model = getattr(chunk, "model", None) or draft.model
        usage = _attr(chunk, "usage")
        if usage is not None:
            draft.usage = usage
            cost = getattr(usage, "cost", None)
            if cost is not None:
                draft.cost = cost
        choices = _attr(chunk, "choices")
        if not choices:
            return None
        choice = _values(choices[0])
        finish_reason = choice.get("finish_reason")
        if finish_reason:
            draft.finish_reason = finish_reason
        delta = _values(choice.get("delta"))
        text = delta.get("content")
        reasoning = delta.get("reasoning_content")
        calls = delta.get("tool_calls")
        thinking = delta.get("thinking_blocks")
        if text and not (reasoning or calls or thinking):  # the hot path: a text token
            self._text.append(text)
            return _text_message(text, "assistant", draft.message_id, True)
        return self._general(text, reasoning, calls, thinking)

    def _general(self, text: Any, reasoning: Any, calls: Any, thinking: Any) -> Message | None:
        draft = self.draft
        content: list[ContentBlock] = []
        if thinking:
            for position, block in enumerate(thinking):
                data = block if isinstance(block, dict) else _as_dict(block) or {}
                index = data.get("index") or position
                if data.get("type") == "redacted_thinking":
                    draft.add_thinking(index, None, data.get("data"), redacted=True)
                else:
                    draft.add_thinking(index, data.get("thinking"), data.get("signature"))
        if reasoning:
            draft.reasoning += reasoning
            content.append(ReasoningBlock(summary=reasoning))
        if text:
            self._text.append(text)
            content.append(TextBlock(text=text))
        fragments: list[dict[str, Any]] = []
        for call in calls or ():
            function = call.function
            name = getattr(function, "name", None) if function is not None else None
            arguments = getattr(function, "arguments", None) if function is not None else None
            index = call.index if call.index is not None else 0
            draft.add_call_fragment(index, call.id, name, arguments)
            if not (call.id or name or arguments):
                continue  # Anthropic opens each tool input with an empty piece
            fragments.append(
                {"index": index, "id": call.id, "function": {"name": name, "arguments": arguments}}
            )
        if not content and not fragments:
            return None
        return Message(
            message_id=draft.message_id,
            role="assistant",
            content=content,
            delta=True,
            reasoning=reasoning or None,
            tools_calls=fragments or None,
        )

    @property
    def answered(self) -> bool:
        """Whether an answer came: text, reasoning or a tool call, or a finish reason with the
        provider's token usage (an empty but real answer). A stream of chunks without choices
        (`choices: []`) is none; nor is a bare finish reason without usage, which is what
        litellm makes of a 200 whose body holds no stream events (a proxy's HTML page,
        broken JSON, an empty body): streams always ask for usage."""
        draft = self.draft
        if self._text or draft.calls or draft.reasoning or draft.thinking:
            return True
        return bool(draft.finish_reason) and draft.usage is not None

    def finish(self) -> Message:
        """The complete message; call once the stream has ended."""
        self.draft.text = "".join(self._text)
        return self.draft.build(self.provider)


__all__ = [
    "REDACTED_THINKING",
    "Draft",
    "StreamAssembler",
    "message_from_response",
    "openai_tool_call",
    "parse_arguments",
    "scrub",
    "token_usages",
]
