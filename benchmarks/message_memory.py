"""What a message loaded from a store takes in memory, against its stored JSON (issue 17).

    python benchmarks/message_memory.py [--messages 1000] [--chars 240]

`--messages` rows of one text message each (`--chars` characters of text, user and assistant
alternating), as a store writes them (`encode_message`), are read back three ways, each under
`tracemalloc` (the bytes still held afterwards, divided by the number of messages):

- `text`: the rows kept as text, as a lazy history keeps the recent messages of a thread it
  loaded until code reads them;
- `decoded`: validated into `Message` objects (`decode_messages`), as pydantic makes them;
- `sealed`: decoded and then sealed, as a thread keeps the messages it has read (its fields set
  and empty containers shared).

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
from tenxgraph.core.state.sealed import seal
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
    block = message.content[0]
    return {
        "model": sys.getsizeof(message),
        "its __dict__ (11 fields)": sys.getsizeof(message.__dict__),
        "content list": sys.getsizeof(message.content),
        "text block": sys.getsizeof(block),
        "its __dict__ (4 fields)": sys.getsizeof(block.__dict__),
        "text": sys.getsizeof(block.__dict__["text"]),
        "message_id": sys.getsizeof(message.message_id),
        "timestamp": sys.getsizeof(message.timestamp),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--chars", type=int, default=240)
    args = parser.parse_args()
    stored = rows(args.messages, args.chars)
    json_bytes = sum(len(r.encode()) for r in stored) / len(stored)
    print(f"{args.messages} messages of {args.chars} characters: {json_bytes:.0f} B of JSON each")
    ways: dict[str, Callable[[], Any]] = {
        "text": lambda: [r.encode().decode() for r in stored],  # fresh copies, as read
        "decoded": lambda: decode_messages(AgentState, "t", stored),
        "sealed": lambda: sealed(stored),
    }
    kept: Any = None
    for name, make in ways.items():
        size, kept = held(make)
        per = size / len(stored)
        print(f"{name:<8} {per:7.0f} B per message  {per / json_bytes:5.2f}x its JSON")
    total = 0
    for part, size in parts(kept[0]).items():
        total += size
        print(f"  {part:<26} {size:5d} B")
    print(f"  {'sum':<26} {total:5d} B")


if __name__ == "__main__":
    main()
