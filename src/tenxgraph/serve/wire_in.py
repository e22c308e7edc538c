"""What clients send, as tenxgraph messages and run input: LangChain message dicts, OpenAI-
style role dicts, LangChain v0 data blocks, a bare string (a user message) or our own
`Message` JSON (see `tenxgraph.serve.wire` for the shapes). Anything else is a `WireError`
naming where in the request it was and what is accepted."""

from __future__ import annotations

import json
from functools import cache
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError

from tenxgraph.core.state.agent_state import RESERVED_FIELDS
from tenxgraph.core.state.message import Message, Role, TokenUsages
from tenxgraph.core.state.message_block import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from tenxgraph.serve.wire import _MEDIA_OF_WIRE, _SOURCE_KEYS, WireError, _error

_ROLE_OF_TYPE: dict[str, Role] = dict(human="user", user="user", ai="assistant", tool="tool")
_ROLE_OF_TYPE |= dict(assistant="assistant", AIMessageChunk="assistant")
_ROLE_OF_TYPE |= dict(system="system", developer="system")
_MESSAGE_TYPES = "human, user, ai, assistant, AIMessageChunk, system, developer, tool"
_PART_TYPES = (
    "text, image_url, image, audio, video, file, reasoning, tool_call, non_standard, "
    "or a tenxgraph block (document, data, tool_result, remote_tool_call, annotation, error)"
)
_URLS = "an http(s) URL or a data:<mime>;base64,<data> URL"
_SOURCES = "one of url, base64 or file_id (or LangChain v0 source_type with url, data or id)"
# what a state update from a client may not set: the runtime owns these (the runtime would
# refuse them too, but later and without saying where in the request they were)
_NOT_SETTABLE = RESERVED_FIELDS


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


@cache
def _blocks() -> TypeAdapter[ContentBlock]:
    return TypeAdapter(ContentBlock)


# the `type` of every tenxgraph block
_OWN_TYPES = frozenset(b.model_fields["type"].default for b in get_args(get_args(ContentBlock)[0]))
_MESSAGES = "a LangChain message dict, an OpenAI-style role dict, a Message dump, or a string"
_CALLS = "{'name', 'args': {...}, 'id'} or {'id', 'function': {'name', 'arguments': '<json>'}}"


def message_from_wire(data: Any, where: str = "message") -> Message:
    """The `Message` a client sent: a LangChain or OpenAI-style message dict, our own `Message`
    dump (it has ``message_id``), or a bare string (a user message). The wire ``id`` is kept
    as ``message_id``. Raises `WireError` naming the path under `where`."""
    if isinstance(data, Message):
        return data
    if isinstance(data, str):
        return Message.text_message(data)
    if not isinstance(data, dict):
        raise _error(where, f"expected a message, got {_kind(data)}", _MESSAGES)
    if "message_id" in data and "type" not in data:
        try:
            return Message.model_validate(data)
        except ValidationError as exc:
            raise _invalid(exc, where, "a tenxgraph Message dump") from None
    if data.keys() == {"type", "data"} and isinstance(data["data"], dict):  # messages_to_dict
        return message_from_wire({**data["data"], "type": data["type"]}, where)
    role = _role(data, where)
    content = _content_from_wire(data.get("content"), f"{where}.content")
    fields: dict[str, Any] = {"role": role, "content": content}
    message_id = data.get("id")
    if message_id is not None:
        if type(message_id) not in (str, int):
            raise _error(f"{where}.id", f"expected a string, got {_kind(message_id)}", "a string")
        fields["message_id"] = message_id
    if isinstance(data.get("name"), str):
        fields["metadata"] = {"name": data["name"]}
    if role == "assistant":
        raw_calls = [] if data.get("tool_calls") is None else data["tool_calls"]
        if not isinstance(raw_calls, list):
            raise _error(f"{where}.tool_calls", f"expected a list, got {_kind(raw_calls)}", _CALLS)
        known = {b.id for b in content if isinstance(b, ToolCallBlock)}
        for i, raw in enumerate(raw_calls):
            call = _tool_call(raw, f"{where}.tool_calls[{i}]")
            if call.id not in known:
                content.append(call)
        fields["reasoning"] = _reasoning(data.get("additional_kwargs"), content)
        fields["usages"] = _usage_from_wire(data.get("usage_metadata"), f"{where}.usage_metadata")
    elif role == "tool":
        fields["content"] = _tool_content(data, content, where)
    try:
        return Message.model_validate(fields)
    except ValidationError as exc:  # e.g. NaN in tool call args
        raise _invalid(exc, where, "JSON values (no NaN or infinity)") from None


def messages_from_wire(items: Any, where: str = "messages") -> list[Message]:
    """A list of wire messages (or one) as `Message`s; see `message_from_wire`."""
    if isinstance(items, list):
        return [message_from_wire(item, f"{where}[{i}]") for i, item in enumerate(items)]
    if isinstance(items, dict | str | Message):
        return [message_from_wire(items, where)]
    raise _error(
        where, f"expected a list of messages, got {_kind(items)}", f"a list of {_MESSAGES}"
    )


def input_from_wire(data: Any) -> dict[str, Any] | None:
    """A run's ``input`` as LangGraph clients send it, as the input dict `ainvoke` takes:
    ``messages`` converted, every other key a state field update under ``state``."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise _error(
            "input",
            f"expected an object, got {_kind(data)}",
            "null, or an object such as {'messages': [...]} with state fields beside it",
        )
    converted: dict[str, Any] = {}
    updates: dict[str, Any] = {}
    for key, value in data.items():
        if key == "messages":
            converted["messages"] = messages_from_wire(value, "input.messages")
        elif key in _NOT_SETTABLE:
            raise _error(
                f"input.{key}",
                "this field belongs to the runtime and cannot be set",
                "'messages' for new turns, and the state's own fields",
            )
        else:
            updates[key] = value
    if updates:
        converted["state"] = updates
    return converted


def _invalid(exc: ValidationError, where: str, accepted: str) -> WireError:
    first = exc.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    return _error(f"{where}.{location}" if location else where, first["msg"], accepted)


def _show(value: Any) -> str:
    return repr(value[:40] + "...") if isinstance(value, str) and len(value) > 40 else repr(value)


def _role(data: dict[str, Any], where: str) -> Role:
    key = "role" if "role" in data and "type" not in data else "type"
    value = data.get(key)
    role = _ROLE_OF_TYPE.get(value) if isinstance(value, str) else None
    if role is None:
        problem = "missing" if value is None else f"{_show(value)} is not a message type"
        raise _error(f"{where}.{key}", problem, _MESSAGE_TYPES)
    return role


def _content_from_wire(content: Any, where: str) -> list[ContentBlock]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, list):
        raise _error(
            where, f"expected a string or a list, got {_kind(content)}", "a string or parts"
        )
    return [_part_from_wire(part, f"{where}[{i}]") for i, part in enumerate(content)]


def _part_from_wire(part: Any, where: str) -> ContentBlock:
    if isinstance(part, str):
        return TextBlock(text=part)
    if not isinstance(part, dict):
        raise _error(where, f"expected a content part, got {_kind(part)}", "an object or a string")
    kind = part.get("type")
    if kind == "text":
        return TextBlock(text=_string(part.get("text"), f"{where}.text"))
    if kind == "image_url":
        value = part.get("image_url")
        url, at = (value.get("url"), ".image_url.url") if isinstance(value, dict) else (value, "")
        return ImageBlock(media=MediaRef.model_validate(_url_source(url, where + at, None)))
    if kind == "reasoning" and "summary" not in part:
        fields = _known(part.get("extras"), ReasoningBlock)
        fields["summary"] = _string(part.get("reasoning"), f"{where}.reasoning")
        return _checked(ReasoningBlock, fields, where)
    if kind in _MEDIA_OF_WIRE and "media" not in part:
        return _media_from_wire(_MEDIA_OF_WIRE[kind], part, where)
    if kind == "tool_call":
        return _tool_call(part, where)
    if kind == "non_standard" and isinstance(part.get("value"), dict):
        part, where = part["value"], f"{where}.value"
    if part.get("type") in _OWN_TYPES:
        try:
            return _blocks().validate_python(part)
        except ValidationError as exc:
            raise _invalid(exc, where, "a tenxgraph content block") from None
    raise _error(f"{where}.type", f"{_show(part.get('type'))} is not a part type", _PART_TYPES)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _error(where, f"expected a string, got {_kind(value)}", "a string")
    return value


def _known(extras: Any, model: type[BaseModel]) -> dict[str, Any]:
    """The `extras` (or v0 `metadata`) entries that are fields of `model`."""
    if not isinstance(extras, dict):
        return {}
    return {k: v for k, v in extras.items() if k in model.model_fields and k not in ("type",)}


_B = TypeVar("_B", bound=BaseModel)


def _checked(model: type[_B], fields: dict[str, Any], where: str) -> _B:
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise _invalid(exc, where, f"a valid {model.__name__}") from None


def _url_source(url: Any, where: str, mime_type: Any) -> dict[str, Any]:
    """MediaRef fields for a URL: http(s) by reference, a base64 ``data:`` URL inline."""
    if isinstance(url, str) and url.startswith("data:"):
        header, comma, data = url[5:].partition(",")
        if not comma or not header.endswith(";base64"):
            raise _error(where, "a data: URL must be base64-encoded", _URLS)
        mime = header.removesuffix(";base64").split(";")[0] or mime_type
        return {"kind": "data", "data_base64": data, "mime_type": mime}
    if isinstance(url, str) and url.lower().startswith(("http://", "https://")):
        return {"kind": "url", "url": url, "mime_type": mime_type}
    raise _error(where, f"{_show(url)} is not a URL tenxgraph reads", _URLS)


def _media_from_wire(
    model: type[ImageBlock | AudioBlock | VideoBlock | DocumentBlock],
    part: dict[str, Any],
    where: str,
) -> ContentBlock:
    if "source_type" in part:  # LangChain v0: {"source_type": "url"|"base64"|"id", ...}
        keys = {"url": "url", "base64": "data", "id": "id"}
        key = keys.get(part["source_type"])
        if key is None:
            raise _error(f"{where}.source_type", f"{_show(part['source_type'])}", "url, base64, id")
        sources = {
            ("base64" if key == "data" else "file_id" if key == "id" else key): part.get(key)
        }
    else:
        sources = {k: part[k] for k in ("url", "base64", "file_id") if part.get(k) is not None}
    if len(sources) != 1:
        raise _error(where, f"{len(sources)} sources given ({', '.join(sources)})", _SOURCES)
    ((key, value),) = sources.items()
    mime = part.get("mime_type")
    if key == "url":
        media = _url_source(value, f"{where}.url", mime)
    else:
        media = {"kind": "data" if key == "base64" else "file_id", "mime_type": mime}
        media[_SOURCE_KEYS[media["kind"]]] = value
    extras = {**_known(part.get("metadata"), MediaRef), **_known(part.get("extras"), MediaRef)}
    if isinstance(part.get("metadata"), dict) and "name" in part["metadata"]:  # Agent Chat UI
        extras.setdefault("filename", part["metadata"]["name"])
    fields = _known(part.get("extras"), model)
    fields["media"] = {**extras, **media}
    return _checked(model, fields, where)


def _tool_call(call: Any, where: str) -> ToolCallBlock:
    if not isinstance(call, dict):
        raise _error(where, f"expected a tool call, got {_kind(call)}", _CALLS)
    function = call.get("function")
    if isinstance(function, dict):  # OpenAI: arguments as JSON text
        name, args, args_at = function.get("name"), function.get("arguments"), ".function"
        if isinstance(args, str):
            try:
                args = json.loads(args or "{}")
            except ValueError:
                raise _error(f"{where}.function.arguments", "not JSON", "a JSON object") from None
        args_at += ".arguments"
    else:
        name, args, args_at = call.get("name"), call.get("args"), ".args"
    if not isinstance(name, str) or not name:
        raise _error(f"{where}.name", f"expected a tool name, got {_show(name)}", _CALLS)
    if args is not None and not isinstance(args, dict):
        raise _error(where + args_at, f"expected an object, got {_kind(args)}", "a JSON object")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        problem = f"expected the call's id, got {_show(call_id)}"
        raise _error(f"{where}.id", problem, "a non-empty string (tool results answer it)")
    return _checked(ToolCallBlock, {"id": call_id, "name": name, "args": args or {}}, where)


def _reasoning(kwargs: Any, content: list[ContentBlock]) -> str | None:
    given = kwargs.get("reasoning_content") if isinstance(kwargs, dict) else None
    if isinstance(given, str) and given:
        return given
    return "".join(b.summary for b in content if isinstance(b, ReasoningBlock)) or None


def _tool_content(data: dict[str, Any], content: list[ContentBlock], where: str) -> list[Any]:
    """A tool message's content: its text becomes the output of a `ToolResultBlock`."""
    call_id = data.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        problem = "missing" if call_id is None else f"expected a string, got {_kind(call_id)}"
        raise _error(f"{where}.tool_call_id", problem, "the id of the tool call it answers")
    status = data.get("status", "success")
    if status not in ("success", "error"):
        raise _error(f"{where}.status", f"{_show(status)} is not a status", "success, error")
    if any(isinstance(b, ToolResultBlock) for b in content):
        return content
    failed = status == "error"
    result = ToolResultBlock(
        call_id=call_id,
        output="".join(b.text for b in content if isinstance(b, TextBlock)),
        is_error=failed,
        status="failed" if failed else "completed",
    )
    return [result, *(b for b in content if not isinstance(b, TextBlock))]


def _usage_from_wire(usage: Any, where: str) -> TokenUsages | None:
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise _error(where, f"expected an object, got {_kind(usage)}", "LangChain usage_metadata")
    given_in, given_out = usage.get("input_token_details"), usage.get("output_token_details")
    details_in = given_in if isinstance(given_in, dict) else {}
    details_out = given_out if isinstance(given_out, dict) else {}
    fields = {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
        "total_tokens": usage.get("total_tokens"),
        "reasoning_tokens": details_out.get("reasoning") or 0,
        "cache_read_input_tokens": details_in.get("cache_read") or 0,
        "cache_creation_input_tokens": details_in.get("cache_creation") or 0,
    }
    return _checked(TokenUsages, fields, where)


__all__ = ["input_from_wire", "message_from_wire", "messages_from_wire"]
