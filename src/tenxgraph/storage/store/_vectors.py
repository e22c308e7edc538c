"""How an item's vectors are stored and scored.

An item's vectors (one per text embedded) are kept as one blob next to its value: their
length (4 bytes, little-endian) then every number as a little-endian float32. Each vector is
scaled to length 1 before it is stored, so a cosine similarity is one dot product at search
time; a zero vector stays zero (it scores 0 against anything).
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Sequence
from operator import mul

_DIMS = struct.Struct("<I")
_SWAP = sys.byteorder != "little"


def unit(vector: Sequence[float]) -> list[float]:
    """`vector` scaled to length 1 (a zero vector as it is)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return list(vector) if norm == 0.0 else [x / norm for x in vector]


def pack(vectors: Sequence[Sequence[float]], dims: int) -> bytes:
    """The stored blob of `vectors` (each `dims` long, checked by the caller)."""
    numbers = array("f")
    for vector in vectors:
        numbers.extend(unit(vector))
    if _SWAP:
        numbers.byteswap()
    return _DIMS.pack(dims) + numbers.tobytes()


def blob_dims(blob: bytes) -> int:
    """The length of the vectors in a stored blob."""
    return int(_DIMS.unpack_from(blob)[0])


def best_score(query: Sequence[float], blob: bytes) -> float:
    """The highest cosine similarity between `query` (length 1) and the blob's vectors (of
    `query`'s length: the caller checks `blob_dims` first), within -1.0..1.0."""
    numbers = array("f")
    numbers.frombytes(blob[_DIMS.size :])
    if _SWAP:
        numbers.byteswap()
    dims = len(query)
    best = -math.inf
    for start in range(0, len(numbers), dims):
        best = max(best, sum(map(mul, query, numbers[start : start + dims])))
    if best == -math.inf:
        return 0.0
    return min(1.0, max(-1.0, best))  # float32 rounding may step just past the bounds


__all__ = ["best_score", "blob_dims", "pack", "unit"]
