"""`Chunks`: the `StreamChunk`s of one run, built only when its consumer asked for them."""

from __future__ import annotations

import time
from typing import Any

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph.merge import copy_message
from tenxgraph.core.graph.node import NodeEvent
from tenxgraph.core.state import CustomEvent, Message, StreamChunk, StreamEvent
from tenxgraph.core.state._construct import (
    _new,
    _set_dict,
    _set_extra,
    _set_fields_set,
    _set_private,
    assemble,
    template,
)

_CHUNK_SET = frozenset({"event", "thread_id", "run_id", "timestamp"})
_MESSAGE_CHUNK_SET = frozenset({*_CHUNK_SET, "message"})
_time = time.time


class Chunks:
    """Builds one run's chunks from a template of the fields they all share."""

    __slots__ = ("_template", "namespace", "run_id", "streamed", "thread_id")

    def __init__(self, thread_id: str, run_id: str, namespace: tuple[str, ...] = ()) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.namespace = namespace
        self._template: dict[str, Any] | None = None  # built by the first chunk
        self.streamed: set[str | int] = set()  # ids of messages a NodeEvent already sent

    @property
    def template(self) -> dict[str, Any]:
        shared = self._template
        if shared is None:
            shared = self._template = template(
                StreamChunk,
                thread_id=self.thread_id,
                run_id=self.run_id,
                timestamp=0.0,
                namespace=self.namespace,
            )
        return shared

    def chunk(self, event: StreamEvent, **values: Any) -> StreamChunk:
        fields = self.template.copy()
        fields["event"] = event.value
        fields["timestamp"] = time.time()
        fields.update(values)
        return assemble(StreamChunk, fields, {*_CHUNK_SET, *values})

    def message(self, message: Message) -> StreamChunk:
        """The hot path of streaming: one chunk per delta (`assemble`, written out)."""
        fields = (self._template or self.template).copy()
        fields["message"] = message
        fields["timestamp"] = _time()
        chunk = _new(StreamChunk)
        _set_dict(chunk, fields)
        _set_fields_set(chunk, set(_MESSAGE_CHUNK_SET))
        _set_extra(chunk, None)
        _set_private(chunk, None)
        return chunk

    def event(self, event: NodeEvent) -> StreamChunk:
        """A node's progress report; a message it carries is not sent again at the step's
        end."""
        if event.message is None:
            return self.chunk(event.event, data=event.data)
        self.streamed.add(event.message.message_id)
        return self.chunk(event.event, data=event.data, message=copy_message(event.message))

    def custom(self, event: CustomEvent) -> StreamChunk:
        """What a node chose to stream."""
        return self.chunk(StreamEvent.CUSTOM, data={"data": event.data})

    def update(self, status: str, **data: Any) -> StreamChunk:
        return self.chunk(StreamEvent.UPDATES, data={"status": status, **data})

    def error(self, exc: Exception) -> StreamChunk:
        return self.chunk(StreamEvent.ERROR, data=_error_data(exc))


def _error_data(exc: Exception) -> dict[str, Any]:
    from tenxgraph.core.redaction import redact

    error = redact(str(exc))  # no key is streamed
    data: dict[str, Any] = {"status": "error", "error": error, "error_type": type(exc).__name__}
    if isinstance(exc, GraphError):
        data["error_code"] = exc.error_code
        data.update({k: v for k, v in exc.context.items() if k in ("node", "field")})
    return data


__all__ = ["Chunks"]
