"""What rolling a thread back (`CompiledGraph.arestore`) does beyond the thread's own state.

A subgraph node keeps its run in a thread of its own, named by the parent's step
(`child_thread_id`); the parent deletes it once the step is saved. A run rolled back in the
middle of such a step leaves that thread behind, and the next run, which counts its steps
from the restored version again, would find it and continue or reuse the rolled-back run's
child. So the child threads of the rolled-back steps are deleted (theirs too). A version
paused inside a subgraph node keeps its paused child, unless the child moved on after that
version (the rolled-back run answered it): restoring that would need the child's own past, so
it is refused before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph.core.graph.subgraph import Subgraph, child_thread_id

if TYPE_CHECKING:
    from tenxgraph.core.graph.program import Program
    from tenxgraph.core.state import AgentState
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer


async def paused_children(
    program: Program, store: BaseCheckpointer, thread_id: str, state: AgentState, saved_at: float
) -> set[str]:
    """The child threads `state` (saved at `saved_at`) is paused in, to keep; `ValueError` if
    one of them changed after it."""
    meta = state.execution_meta
    node = meta.interrupted_node
    spec = None if node is None or not meta.is_interrupted() else program.specs.get(node)
    if spec is None or not isinstance(spec.func, Subgraph):
        return set()
    kept = set()
    for key in await _keys(store, thread_id, spec.name, meta.step):
        child = child_thread_id(thread_id, key, meta.step)
        latest = await store.ahistory(child, limit=1)
        if latest and latest[0].created_at > saved_at:
            raise ValueError(
                f"Thread {thread_id!r} cannot be rolled back to a version paused inside "
                f"subgraph node {node!r}: the child's thread {child!r} went on after it. "
                "Roll back to a version before or after that pause"
            )
        kept.add(child)
    return kept


async def forget_children(
    program: Program,
    store: BaseCheckpointer,
    thread_id: str,
    steps: range,
    keep: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Delete the threads `program`'s subgraph nodes kept for `thread_id`'s `steps` (and the
    ones those kept), but the ones in `keep`."""
    for name, spec in program.specs.items():
        if not isinstance(spec.func, Subgraph):
            continue
        inner = spec.func.graph._program
        for step in steps:
            for key in await _keys(store, thread_id, name, step):
                child = child_thread_id(thread_id, key, step)
                if child in keep:
                    continue
                latest = await store.ahistory(child, limit=1)
                if latest:
                    await forget_children(inner, store, child, range(latest[0].step + 2))
                await store.adelete_thread(child)


async def _keys(store: BaseCheckpointer, thread_id: str, name: str, step: int) -> list[str]:
    """The keys of node `name`'s child threads at `step`: `name`, and `name[i]` for the i-th
    `Send` to it, those that exist."""
    keys = []
    if await store.aversion(child_thread_id(thread_id, name, step)) is not None:
        keys.append(name)
    index = 0
    while await store.aversion(child_thread_id(thread_id, f"{name}[{index}]", step)) is not None:
        keys.append(f"{name}[{index}]")
        index += 1
    return keys


__all__ = ["forget_children", "paused_children"]
