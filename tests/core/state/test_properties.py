"""Property tests: JSON round trips of blocks, messages and states; add_messages invariants and
agreement with a naive reference through forks and in-place changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from tenxgraph.core.state import (
    AgentState,
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ExecutionState,
    ExecutionStatus,
    ImageBlock,
    MediaRef,
    Message,
    ReasoningBlock,
    StopRequestStatus,
    TextBlock,
    TokenUsages,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
    add_messages,
    append_items,
)
from tenxgraph.core.state.message_block import RemoteToolCallBlock
from tests._helpers import naive_add_messages, same_objects

SETTINGS = settings(max_examples=150, deadline=None)

# -- strategies -------------------------------------------------------------------------------

texts = st.text(max_size=12)
opt_texts = st.none() | texts
small_ints = st.integers(min_value=-(2**31), max_value=2**31)
opt_ints = st.none() | small_ints
finite_floats = st.floats(allow_nan=False, allow_infinity=False)

json_scalars = st.none() | st.booleans() | st.integers() | finite_floats | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
json_dicts = st.dictionaries(texts, json_values, max_size=4)


@st.composite
def media_refs(draw: st.DrawFn) -> MediaRef:
    kind = draw(st.sampled_from(["url", "file_id", "data"]))
    field = {"url": "url", "file_id": "file_id", "data": "data_base64"}[kind]
    values: dict[str, Any] = {
        "url": draw(opt_texts),
        "file_id": draw(opt_texts),
        "data_base64": draw(opt_texts),
    }
    values[field] = draw(st.text(min_size=1, max_size=12))
    return MediaRef(
        kind=kind,  # type: ignore[arg-type]
        **values,
        mime_type=draw(opt_texts),
        size_bytes=draw(opt_ints),
        sha256=draw(opt_texts),
        filename=draw(opt_texts),
        width=draw(opt_ints),
        height=draw(opt_ints),
        duration_ms=draw(opt_ints),
        page=draw(opt_ints),
    )


annotation_refs = st.builds(
    AnnotationRef, url=opt_texts, file_id=opt_texts, page=opt_ints, index=opt_ints, title=opt_texts
)

BLOCK_STRATEGIES: dict[str, st.SearchStrategy[BaseModel]] = {
    "text": st.builds(TextBlock, text=texts, annotations=st.lists(annotation_refs, max_size=2)),
    "image": st.builds(
        ImageBlock,
        media=media_refs(),
        alt_text=opt_texts,
        bbox=st.none() | st.lists(finite_floats, max_size=4),
    ),
    "audio": st.builds(
        AudioBlock,
        media=media_refs(),
        transcript=opt_texts,
        sample_rate=opt_ints,
        channels=opt_ints,
    ),
    "video": st.builds(VideoBlock, media=media_refs(), thumbnail=st.none() | media_refs()),
    "document": st.builds(
        DocumentBlock,
        media=media_refs(),
        text=opt_texts,
        pages=st.none() | st.lists(small_ints, max_size=3),
        excerpt=opt_texts,
    ),
    "data": st.builds(
        DataBlock, mime_type=texts, data_base64=opt_texts, media=st.none() | media_refs()
    ),
    "tool_call": st.builds(
        ToolCallBlock, id=texts, name=texts, args=json_dicts, tool_type=opt_texts
    ),
    "remote_tool_call": st.builds(
        RemoteToolCallBlock, id=texts, name=texts, args=json_dicts, tool_type=texts
    ),
    "tool_result": st.builds(
        ToolResultBlock,
        call_id=texts,
        output=json_values,
        is_error=st.booleans(),
        status=st.sampled_from([None, "completed", "failed"]),
    ),
    "reasoning": st.builds(
        ReasoningBlock,
        summary=texts,
        details=st.none() | st.lists(texts, max_size=3),
        signature=opt_texts,
    ),
    "annotation": st.builds(
        AnnotationBlock,
        kind=st.sampled_from(["citation", "note"]),
        refs=st.lists(annotation_refs, max_size=2),
        spans=st.none() | st.lists(st.tuples(small_ints, small_ints), max_size=3),
    ),
    "error": st.builds(ErrorBlock, message=texts, code=opt_texts, data=st.none() | json_dicts),
}
blocks = st.one_of(*BLOCK_STRATEGIES.values())

message_ids = st.text(max_size=16) | st.integers()
token_usages = st.builds(
    TokenUsages,
    completion_tokens=small_ints,
    prompt_tokens=small_ints,
    total_tokens=small_ints,
    reasoning_tokens=small_ints,
    cache_creation_input_tokens=small_ints,
    cache_read_input_tokens=small_ints,
    image_tokens=opt_ints,
    audio_tokens=opt_ints,
)
tool_call_dicts = st.fixed_dictionaries(
    {
        "id": texts,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": texts, "arguments": texts}),
    }
)

messages = st.builds(
    Message,
    message_id=message_ids,
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    content=st.lists(blocks, max_size=4),
    delta=st.booleans(),
    tools_calls=st.none() | st.lists(tool_call_dicts | json_dicts, max_size=2),
    reasoning=opt_texts,
    timestamp=st.none() | finite_floats,
    metadata=json_dicts,
    usages=st.none() | token_usages,
    raw=st.none() | json_dicts,
    parsed_content=st.none() | json_dicts,
)


class Profile(BaseModel):
    name: str
    weight: float
    tags: list[str] = Field(default_factory=list)


class RichState(AgentState):
    title: str = ""
    count: int = 0
    labels: list[str] = Field(default_factory=list)
    scores: dict[str, int] = Field(default_factory=dict)
    ratio: float | None = None
    profile: Profile | None = None
    seen: Annotated[list[str], append_items] = Field(default_factory=list)


execution_states = st.builds(
    ExecutionState,
    current_node=texts,
    step=st.integers(min_value=0, max_value=10**6),
    status=st.sampled_from(list(ExecutionStatus)),
    interrupted_node=opt_texts,
    interrupt_reason=opt_texts,
    interrupt_data=st.none() | json_dicts,
    thread_id=opt_texts,
    stop_current_execution=st.sampled_from(list(StopRequestStatus)),
    internal_data=json_dicts,
)

rich_states = st.builds(
    RichState,
    context=st.lists(messages, max_size=2),
    context_summary=opt_texts,
    execution_meta=execution_states,
    title=texts,
    count=st.integers(),
    labels=st.lists(texts, max_size=3),
    scores=st.dictionaries(texts, st.integers(), max_size=3),
    ratio=st.none() | finite_floats,
    profile=st.none()
    | st.builds(Profile, name=texts, weight=finite_floats, tags=st.lists(texts, max_size=3)),
    seen=st.lists(texts, max_size=3),
)


# -- round trips ------------------------------------------------------------------------------


@SETTINGS
@given(block=blocks)
def test_any_block_round_trips_through_json(block: BaseModel) -> None:
    restored = type(block).model_validate_json(block.model_dump_json())
    assert restored == block
    # also through the discriminated union, as a one-block message
    message = Message(role="user", content=[block])
    assert Message.model_validate_json(message.model_dump_json()).content == [block]


@SETTINGS
@given(message=messages)
def test_any_message_round_trips_through_json(message: Message) -> None:
    restored = Message.model_validate_json(message.model_dump_json())
    assert restored == message
    assert type(restored.message_id) is type(message.message_id)


@settings(max_examples=100, deadline=None)
@given(state=rich_states)
def test_any_state_round_trips_through_json(state: RichState) -> None:
    restored = RichState.model_validate_json(state.model_dump_json())
    assert restored == state
    assert RichState.field_reducers()["seen"] is append_items


# -- add_messages -----------------------------------------------------------------------------

# Few distinct ids, so that merges collide often; str and int ids that look alike stay distinct.
# Three different messages per (id, delta), so that which duplicate won stays visible.
MERGE_IDS: list[str | int] = [*range(13), "0", "1", "a", "b", "c"]
MERGE_POOL = [
    Message(message_id=i, role="user", content=f"variant {v}", delta=delta)
    for i in MERGE_IDS
    for delta in (False, True)
    for v in range(3)
]


def merge_messages(*, allow_delta: bool = True) -> st.SearchStrategy[Message]:
    return st.sampled_from([m for m in MERGE_POOL if allow_delta or not m.delta])


@st.composite
def clean_histories(draw: st.DrawFn) -> list[Message]:
    """A history as add_messages keeps one: unique ids, no delta messages."""
    candidates = draw(st.lists(merge_messages(allow_delta=False), max_size=10))
    seen: set[str | int] = set()
    history = []
    for message in candidates:
        if message.message_id not in seen:
            seen.add(message.message_id)
            history.append(message)
    return history


@SETTINGS
@given(left=clean_histories(), right=st.lists(merge_messages(), max_size=10))
def test_add_messages_invariants(left: list[Message], right: list[Message]) -> None:
    left_snapshot = list(left)
    merged = add_messages(left, right)

    assert merged is not left
    assert same_objects(left, left_snapshot), "left is not modified"
    assert same_objects(merged[: len(left)], left), "left is a prefix: nothing reordered"
    merged_ids = [m.message_id for m in merged]
    assert len(merged_ids) == len(set(merged_ids)), "no duplicate ids"
    assert not any(m.delta for m in merged), "no delta message"
    left_ids = {m.message_id for m in left}
    first_new: dict[str | int, Message] = {}
    for message in right:
        if not message.delta and message.message_id not in left_ids:
            first_new.setdefault(message.message_id, message)
    assert same_objects(merged[len(left) :], list(first_new.values())), "nothing new is dropped"


def _draw_mutation(data: st.DataObject, length: int) -> Callable[[list[Message]], Any]:
    """One in-place change to a list of `length` messages, drawn once and replayable."""
    new = data.draw(st.lists(merge_messages(allow_delta=False), min_size=1, max_size=3))
    index = data.draw(st.integers(min_value=0, max_value=max(length - 1, 0)))
    stop = data.draw(st.integers(min_value=index, max_value=length))
    changes: dict[str, Callable[[list[Message]], Any]] = {
        "append": lambda h: h.append(new[0]),
        "extend": lambda h: h.extend(new),
        "insert": lambda h: h.insert(index, new[0]),
        "iadd": lambda h: h.__iadd__(new),
        "imul": lambda h: h.__imul__(2),
        "setslice": lambda h: h.__setitem__(slice(index, stop), new),
        "delslice": lambda h: h.__delitem__(slice(index, stop)),
        "sort": lambda h: h.sort(key=lambda m: (str(m.message_id), type(m.message_id).__name__)),
        "reverse": lambda h: h.reverse(),
        "clear": lambda h: h.clear(),
    }
    if length:
        changes |= {
            "setitem": lambda h: h.__setitem__(index, new[0]),
            "pop": lambda h: h.pop(index),
            "delitem": lambda h: h.__delitem__(index),
            "remove": lambda h: h.remove(h[index]),
        }
    return changes[data.draw(st.sampled_from(sorted(changes)))]


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_merge_sequences_with_forks_and_in_place_changes_match_the_naive_reducer(
    data: st.DataObject,
) -> None:
    real: list[list[Message]] = [[]]
    expected: list[list[Message]] = [[]]
    for _ in range(data.draw(st.integers(min_value=1, max_value=20))):
        i = data.draw(st.integers(min_value=0, max_value=len(real) - 1))
        if data.draw(st.integers(0, 3)) == 0:  # change history i in place
            change = _draw_mutation(data, len(real[i]))
            change(real[i])
            change(expected[i])
        else:  # merge into history i: older ones fork, the newest one chains
            right = data.draw(st.lists(merge_messages(), max_size=6))
            real.append(add_messages(real[i], right))
            expected.append(naive_add_messages(expected[i], right))
        assert all(same_objects(r, e) for r, e in zip(real, expected, strict=True))
