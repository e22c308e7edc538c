"""What a message loaded from a store takes in memory, against its stored JSON (issue 17).

    python benchmarks/message_memory.py [--messages 1000] [--chars 240]

`--messages` rows of one text message each (`--chars` characters of text, user and assistant
alternating), as a store writes them (`encode_message`), are read back three ways, each under
`tracemalloc` (the bytes still held afterwards, divided by the number of messages):

- `text`: the rows kept as text, as a lazy history keeps the recent messages of a thread it
  loaded until code reads them;
- `decoded`: validated into `Message` objects (`decode_messages`), as pydantic makes them;
- `sealed`: decoded and then sealed, as a thread keeps the messages it has read: compact (its
  id, role, content and timestamp in slots, no dict for a plain text message; the text block's
  text in a slot, no dict), its fields set and empty containers shared.

Each way reads rows of its own (new message ids): pydantic's JSON reader keeps a cache of
short strings it made, so a second read of the same rows would find their ids made already.
One message is sealed before anything is measured: the first seal imports `ctypes` (about
110 KB, once per process), which would otherwise count as 110 B a message.

Each line prints bytes per message and that over the row's JSON (the issue's goal: at most 2).
Then, for one sealed message, what its parts take (`sys.getsizeof`, shared parts left out).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.sealed import kept_dict, seal
from tenxgraph.storage.checkpointer._codec import decode_messages, encode_message

_FILLER = "The quick brown fox jumps over the lazy dog. "


def rows(count: int, chars: int) -> list[str]:
    """`count` stored rows, each message's text distinct."""
    body = _FILLER * (chars // len(_FILLER) + 1)
    return [
        encode_message(
            Message.text_message(
                (f"{i:06d} " + body)[:chars], "user" if i % 2 == 0 else "assistant"
            )
        )
        for i in range(count)
    ]


def held(make: Callable[[], Any]) -> tuple[int, Any]:
    """The bytes `make()`'s result still holds, and the result."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = make()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, kept
    finally:
        tracemalloc.stop()


def sealed(stored: list[str]) -> list[Message]:
    messages = decode_messages(AgentState, "t", stored)
    for message in messages:
        seal(message)
    return messages


def parts(message: Message) -> dict[str, int]:
    """What each part of `message` takes; a dict slot shared by every compact sealed model
    without fields of its own (`len` 0) counts 0."""
    block = message.content[0]

    def own(fields: dict[str, Any]) -> int:
        return sys.getsizeof(fields) if fields or type(fields) is dict else 0

    return {
        "model (with its slots)": sys.getsizeof(message),
        f"its dict slot ({len(kept_dict(message))} fields)": own(kept_dict(message)),
        "content list": sys.getsizeof(message.content),
        "text block (with its slot)": sys.getsizeof(block),
        f"its dict slot ({len(kept_dict(block))} fields)": own(kept_dict(block)),
        "text": sys.getsizeof(block.text),
        "message_id": sys.getsizeof(message.message_id),
        "timestamp": sys.getsizeof(message.timestamp),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=240)
    args = parser.parse_args()
    stored = rows(args.messages, args.chars)
    sealed(rows(1, 10))  # the first seal's one-time imports, not a message's bytes
    json_bytes = sum(len(r.encode()) for r in stored) / len(stored)
    print(f"{args.messages} messages of {args.chars} characters: {json_bytes:.0f} B of JSON each")
    again, once_more = rows(args.messages, args.chars), rows(args.messages, args.chars)
    ways: dict[str, Callable[[], Any]] = {
        "text": lambda: [r.encode().decode() for r in stored],  # fresh copies, as read
        "decoded": lambda: decode_messages(AgentState, "t", again),
        "sealed": lambda: sealed(once_more),
    }
    kept: Any = None
    for name, make in ways.items():
        size, kept = held(make)
        per = size / len(stored)
        print(f"{name:<8} {per:7.0f} B per message  {per / json_bytes:5.2f}x its JSON")
        if name != "text":
            total = 0
            for part, size in parts(kept[0]).items():
                total += size
                print(f"  {part:<30} {size:5d} B")
            print(f"  {'sum':<30} {total:5d} B")


if __name__ == "__main__":
    main()
