"""Thread ids: what every store accepts as one, checked before anything is read or written.

Kept apart from the stores so that the engine can check a run's thread id without loading
any storage code.
"""

from __future__ import annotations

from typing import Any


def thread_id_of(config: dict[str, Any] | None) -> str:
    """The `thread_id` of a config (checked by `valid_thread_id`), with a clear error when it
    is missing."""
    thread_id = (config or {}).get("thread_id")
    if thread_id is None:
        raise ValueError("config must contain 'thread_id', e.g. config={'thread_id': 'user-42'}")
    return valid_thread_id(thread_id)


#: The longest thread id accepted, in characters.
THREAD_ID_MAX_LENGTH = 255


def valid_thread_id(thread_id: object) -> str:
    """`thread_id` as the str every store keys threads by, or a `ValueError` saying what is
    wrong with it. A thread id is a non-empty str of at most `THREAD_ID_MAX_LENGTH` characters
    without control characters (U+0000-U+001F, U+007F-U+009F) or unpaired surrogates; an int
    is taken as its decimal str (42 and "42" name the same thread). Checked before anything
    is written or read, by every store."""
    if type(thread_id) is str:
        text = thread_id
    elif isinstance(thread_id, str):
        text = str.__str__(thread_id)
    elif isinstance(thread_id, int) and not isinstance(thread_id, bool):
        text = int.__repr__(thread_id)
    else:
        raise ValueError(
            f"thread_id must be a str (or an int), not {type(thread_id).__name__} "
            f"{thread_id!r:.60}; e.g. config={{'thread_id': 'user-42'}}"
        )
    if not text:
        raise ValueError(
            "thread_id must not be empty; pass an id such as 'user-42' (a run whose config has "
            "no thread_id starts a new thread with a random id)"
        )
    if len(text) > THREAD_ID_MAX_LENGTH:
        raise ValueError(
            f"thread_id is {len(text):,} characters long; the limit is {THREAD_ID_MAX_LENGTH} "
            f"(it starts {text[:40]!r}); use a shorter id, e.g. a hash of this one"
        )
    if not text.isprintable():
        from tenxgraph.storage.checkpointer._json_values import forbidden_character

        reason = forbidden_character(text)
        if reason is not None:
            raise ValueError(f"thread_id {text!r:.80} is not valid: {reason}")
    return text


__all__ = ["THREAD_ID_MAX_LENGTH", "thread_id_of", "valid_thread_id"]
