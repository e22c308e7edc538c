"""The answer conversion's fast paths agree with plain reference versions: token counts read from
any usage shape (`token_usages`), credential keys dropped at any depth (`scrub`), and stream
chunks read alike from litellm's objects (fields in pydantic's extra dict) and plain ones."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tenxgraph.core.llm.litellm_client import load_litellm
from tenxgraph.core.llm.wire_in import StreamAssembler, scrub, token_usages
from tenxgraph.core.state import Message, TokenUsages

load_litellm()  # sets the offline cost map before litellm is imported

from litellm.types.utils import (  # noqa: E402
    Delta,
    ModelResponseStream,
    StreamingChoices,
    Usage,
)

SETTINGS = settings(max_examples=300, deadline=None)

# (field, where: 0 the usage, 1 its prompt details, 2 its completion details, key), in order of
# preference: the first place that has a count gives it
SOURCES = (
    ("prompt_tokens", 0, "prompt_tokens"),
    ("completion_tokens", 0, "completion_tokens"),
    ("total_tokens", 0, "total_tokens"),
    ("reasoning_tokens", 2, "reasoning_tokens"),
    ("cache_read_input_tokens", 0, "cache_read_input_tokens"),
    ("cache_read_input_tokens", 1, "cached_tokens"),
    ("cache_creation_input_tokens", 0, "cache_creation_input_tokens"),
    ("cache_creation_input_tokens", 1, "cache_creation_tokens"),
    ("image_tokens", 1, "image_tokens"),
    ("audio_tokens", 1, "audio_tokens"),
)
SECRET_KEYS = {"authorization", "api_key", "api-key", "x-api-key", "x-goog-api-key"}


def reference_usages(data: dict[str, Any]) -> TokenUsages | None:
    if not data:
        return None
    places = [data]
    for key in ("prompt_tokens_details", "completion_tokens_details"):
        details = data.get(key) or {}
        places.append(details if isinstance(details, dict) else details.model_dump())
    counts: dict[str, int] = {}
    for name, where, key in SOURCES:
        value = places[where].get(key)
        if type(value) is int and value and not counts.get(name):
            counts[name] = value
    counts = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, **counts}
    if not counts["total_tokens"]:
        counts["total_tokens"] = counts["prompt_tokens"] + counts["completion_tokens"]
    return TokenUsages(**counts)


def reference_scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: reference_scrub(v)
            for k, v in value.items()
            if not (isinstance(k, str) and k.lower() in SECRET_KEYS | {"proxy-authorization"})
        }
    if isinstance(value, list):
        return [reference_scrub(v) for v in value]
    return value


counts = st.none() | st.booleans() | st.integers(0, 10**6) | st.floats(0, 1e3) | st.text(max_size=3)
count_keys = st.sampled_from(
    [
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "reasoning_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "cached_tokens",
        "cache_creation_tokens",
        "image_tokens",
        "audio_tokens",
        "text_tokens",
        "cost",
    ]
)
details = st.none() | st.dictionaries(count_keys, counts, max_size=5)
usages = st.dictionaries(count_keys, counts, max_size=8).flatmap(
    lambda base: st.fixed_dictionaries(
        {},
        optional={"prompt_tokens_details": details, "completion_tokens_details": details},
    ).map(lambda extra: {**base, **extra})
)


@SETTINGS
@given(usages)
def test_token_usages_reads_every_usage_shape_as_the_reference_does(usage: dict[str, Any]) -> None:
    assert token_usages(usage) == reference_usages(usage)


def test_token_usages_reads_litellm_usage_objects_and_their_details() -> None:
    usage = Usage(
        prompt_tokens=100,
        completion_tokens=40,
        total_tokens=140,
        prompt_tokens_details={"cached_tokens": 60, "audio_tokens": 3, "image_tokens": 5},
        completion_tokens_details={"reasoning_tokens": 9},
    )
    made = token_usages(usage)
    assert made == reference_usages(usage.model_dump())
    assert made is not None
    assert (made.cache_read_input_tokens, made.reasoning_tokens) == (60, 9)
    assert (made.audio_tokens, made.image_tokens) == (3, 5)


def test_a_count_on_the_usage_itself_comes_before_its_details() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "cache_read_input_tokens": 7,
        "cache_creation_input_tokens": 0,  # no count here: the details give it
        "prompt_tokens_details": {"cached_tokens": 9, "cache_creation_tokens": 4},
    }
    made = token_usages(usage)
    assert made is not None
    assert (made.cache_read_input_tokens, made.cache_creation_input_tokens) == (7, 4)
    assert made.total_tokens == 12


keys = st.sampled_from(
    ["id", "choices", "message", "Authorization", "API_KEY", "x-api-key", "X-Goog-Api-Key"]
) | st.text(max_size=6)
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(keys | st.integers(0, 3), inner, max_size=4)
    ),
    max_leaves=12,
)


@SETTINGS
@given(json_like)
def test_scrub_drops_what_the_reference_drops_and_copies_only_then(value: Any) -> None:
    expected = reference_scrub(value)
    scrubbed = scrub(value)
    assert scrubbed == expected
    if expected == value:
        assert scrubbed is value  # nothing to drop: returned as it is


def litellm_chunk(finish: str | None = None, **delta: Any) -> ModelResponseStream:
    return ModelResponseStream(
        id="chatcmpl-s",
        model="m-1",
        choices=[StreamingChoices(index=0, delta=Delta(**delta), finish_reason=finish)],
    )


def plain_chunk(finish: str | None = None, **delta: Any) -> SimpleNamespace:
    calls = [
        SimpleNamespace(index=c["index"], id=c["id"], function=SimpleNamespace(**c["function"]))
        for c in delta.pop("tool_calls", None) or ()
    ]
    values = {"content": None, "reasoning_content": None, "thinking_blocks": None, **delta}
    return SimpleNamespace(
        id="chatcmpl-s",
        model="m-1",
        usage=None,
        choices=[
            SimpleNamespace(
                delta=SimpleNamespace(**values, tool_calls=calls or None), finish_reason=finish
            )
        ],
    )


def shown(message: Message | None) -> Any:
    if message is None:
        return None
    return message.model_dump(exclude={"message_id", "timestamp"})


def test_stream_chunks_read_alike_from_litellm_objects_and_plain_objects() -> None:
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": 1}'}}
    pieces: list[tuple[str | None, dict[str, Any]]] = [
        (None, {"content": "", "role": "assistant"}),
        (None, {"reasoning_content": "hm"}),
        (None, {"content": "Hel"}),
        (None, {"content": "lo"}),
        (None, {"tool_calls": [call]}),
        ("tool_calls", {}),
    ]
    results = []
    for make in (litellm_chunk, plain_chunk):
        assembler = StreamAssembler("openai", "m")
        deltas = [shown(assembler.add(make(finish, **dict(delta)))) for finish, delta in pieces]
        results.append((deltas, shown(assembler.finish())))
    assert results[0] == results[1]
    deltas, final = results[0]
    assert [
        d["content"][0]["text"]
        for d in deltas
        if d and d["content"] and d["content"][0]["type"] == "text"
    ] == ["Hel", "lo"]
    assert final["metadata"]["finish_reason"] == "tool_calls"
    assert final["tools_calls"][0]["function"]["arguments"] == '{"a": 1}'
