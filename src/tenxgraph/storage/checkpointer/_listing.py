"""Thread listing pieces shared by every store: the page size check and the opaque cursor.

A cursor names the last thread of a page by its position in the listing order, the pair
(created_at, thread_id), so the next page starts right after it with an index seek (keyset
paging) instead of counting past every earlier thread (OFFSET). It stays valid when threads
are added or deleted, including the one it names.
"""

from __future__ import annotations

import base64
import binascii
import json
import math

from tenxgraph.storage.checkpointer.thread_ids import THREAD_ID_MAX_LENGTH, valid_thread_id

#: the page size `alist_thread_page` uses when given none
DEFAULT_PAGE_SIZE = 100

_PREFIX = "t1."  # the cursor format's version, so a later format can tell old cursors apart
# the longest cursor we can have made: a float's repr and the longest thread id, JSON-escaped
# (6 characters per character at most), base64 (4 per 3)
_MAX_CURSOR_LENGTH = len(_PREFIX) + 4 * (32 + 6 * THREAD_ID_MAX_LENGTH) // 3 + 4


def check_page_limit(limit: object) -> int:
    """`limit` of `alist_thread_page`: a positive int, or a `ValueError` saying so."""
    if type(limit) is not int or limit < 1:
        raise ValueError(
            f"limit must be a positive int (the number of threads per page), not {limit!r:.40}"
        )
    return limit


def check_offset_and_limit(offset: object, limit: object) -> tuple[int, int | None]:
    """`offset` and `limit` of `alist_threads`: ints >= 0 (limit may be None: no limit)."""
    if type(offset) is not int or offset < 0:
        raise ValueError(f"offset must be an int >= 0, not {offset!r:.40}")
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValueError(f"limit must be an int >= 0 or None (no limit), not {limit!r:.40}")
    return offset, limit


def encode_cursor(created_at: float, thread_id: str) -> str:
    """The cursor of the thread at (created_at, thread_id): opaque, URL-safe text."""
    raw = json.dumps([created_at, thread_id], separators=(",", ":")).encode()
    return _PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: object) -> tuple[float, str]:
    """(created_at, thread_id) of a cursor made by `encode_cursor`; anything else (not a str,
    damaged, made up) raises `ValueError`. The float reads back bit for bit."""
    if not isinstance(cursor, str):
        raise ValueError(
            f"after must be a cursor str (a page's next_cursor) or None, not "
            f"{type(cursor).__name__}"
        )
    try:
        if not cursor.startswith(_PREFIX) or len(cursor) > _MAX_CURSOR_LENGTH:
            raise ValueError("not a thread listing cursor")
        body = cursor[len(_PREFIX) :]
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        if base64.urlsafe_b64encode(raw).decode().rstrip("=") != body:
            raise ValueError("not canonical base64")  # stray characters, dropped silently
        value = json.loads(raw)
        if not (isinstance(value, list) and len(value) == 2):
            raise ValueError("not a pair")
        created_at, thread_id = value
        if type(created_at) not in (float, int) or not math.isfinite(created_at):
            raise ValueError("its time is not a finite number")
        if type(thread_id) is not str:
            raise ValueError("its thread id is not a str")
        return float(created_at), valid_thread_id(thread_id)
    except (ValueError, binascii.Error, RecursionError) as exc:
        raise ValueError(
            f"after={cursor!r:.80} is not a thread listing cursor ({exc}); pass the "
            "next_cursor of a page this store returned, or None for the first page"
        ) from None


__all__ = [
    "DEFAULT_PAGE_SIZE",
    "check_offset_and_limit",
    "check_page_limit",
    "decode_cursor",
    "encode_cursor",
]
