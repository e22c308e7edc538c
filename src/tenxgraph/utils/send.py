"""`Send`: run one node once more in the next step, with a payload of its own (map-reduce)."""

from __future__ import annotations

from typing import Any


class Send:
    """Returned by a condition (or in `Command(goto=...)`): run `node` with `arg`.

    Each `Send` is one run of `node` in the next super-step, called with `arg` in place of the
    state; several `Send`s to one node run it that many times, in parallel (at most
    `config["max_concurrency"]` nodes at once), and their updates merge through the state's
    reducers in the order the `Send`s were given. `arg` must be JSON data (dicts, lists,
    strings, numbers, booleans, None): a paused or crashed run is continued from the stored
    payloads.
    """

    __slots__ = ("arg", "node")

    def __init__(self, node: str, arg: Any) -> None:
        if not isinstance(node, str):
            raise TypeError(f"Send(node, arg) takes a node name, got {type(node).__name__}")
        import json  # on first use: a graph without `Send` never needs it

        try:
            json.dumps(arg, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"Send({node!r}, ...) got a payload that is not JSON data ({exc}): pass dicts, "
                "lists, strings, numbers, booleans or None (a pydantic model: "
                "model.model_dump(mode='json')), so that a paused run can be continued"
            ) from None
        self.node = node
        self.arg = arg

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Send) and (self.node, self.arg) == (other.node, other.arg)

    def __hash__(self) -> int:
        return hash(self.node)

    def __repr__(self) -> str:
        return f"Send(node={self.node!r}, arg={self.arg!r})"


__all__ = ["Send"]
