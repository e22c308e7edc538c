"""`Subgraph`: a compiled graph run as a node of another, durable under the parent's thread.

`add_node("research", compiled)` wraps the compiled graph in a `Subgraph`. When the node runs,
the child graph runs to its end inside the parent's step:

- Its input is the parent's state: the conversation, and the fields both states have (by
  name). A `Send` to the node gives its payload instead (`context` holds its messages).
- Its progress is saved in the parent's checkpointer, as a thread of its own named after the
  parent's thread, the node and the parent's step (`"<thread>::research@3"`). When the child
  pauses (an `interrupt()`, a breakpoint, a stop), the parent pauses at the node with the
  child's question; resuming the parent continues the child where it stopped, and a crash
  is continued the same way, so nothing the child finished runs again (its tool ledger is
  its thread's).
- Its chunks stream out of the parent's `astream` with `namespace=("research",)`; a message
  it streamed whole is not streamed again when the parent's step adds it.
- Back in the parent, the messages the child added go through the parent's `context`
  reducer and the shared fields the child changed through the parent's reducers. A child
  node returning `Command(goto=..., graph=Command.PARENT)` ends the child's run there and
  routes in the parent, with the child's messages so far and the command's update.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from tenxgraph.core.graph.engine import Run
from tenxgraph.core.graph.nesting import Nesting, current_run
from tenxgraph.core.graph.node import NodeOutput, normalize
from tenxgraph.core.graph.run_config import RunSettings
from tenxgraph.core.graph.threads import Threads
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.agent_state import RESERVED_FIELDS
from tenxgraph.core.state.execution_state import ExecutionState, ExecutionStatus
from tenxgraph.core.state.spending import Meter
from tenxgraph.utils.command import ParentCommand
from tenxgraph.utils.constants import ResponseGranularity
from tenxgraph.utils.interrupt import GraphInterrupt, Interrupt, InterruptScope, current_scope
from tenxgraph.utils.send import Send

if TYPE_CHECKING:
    from tenxgraph.core.graph.program import Program
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer


if TYPE_CHECKING:
    from typing import Protocol

    class Compiled(Protocol):
        """What a subgraph node needs of a compiled graph (`CompiledGraph`, which imports this
        module: named by its shape, not imported back)."""

        name: str
        _program: Program
        _threads: Threads

        @property
        def state_type(self) -> type[AgentState]: ...  # (read-only: a graph's is its own)


#: config keys of the parent's run that are not the child's
_PARENT_ONLY = ("thread_id", "run_id", "checkpoint_version", "is_stream", "multitask_strategy")
_MISSING = object()


def child_thread_id(thread_id: str, key: str, step: int) -> str:
    """The thread a subgraph node `key` keeps its run in, for the parent's `step`."""
    return f"{thread_id}::{key}@{step}"


class Subgraph:
    """A compiled graph as a node of another (see the module's docstring)."""

    def __init__(self, graph: Compiled) -> None:
        self.graph = graph
        # the child's program with the parent's checkpointer and media, its thread registry
        self._bound: tuple[BaseCheckpointer | None, Any, Program, Threads] | None = None

    def __repr__(self) -> str:
        return f"Subgraph({self.graph.name!r})"

    def bound(
        self, checkpointer: BaseCheckpointer | None, media: Any = None
    ) -> tuple[Program, Threads]:
        """The child graph as it runs under a parent keeping its threads in `checkpointer`
        and its media in `media` (the parent's `MediaOffload`: the child's messages end up in
        the parent's thread, so their media goes where the parent's Agents read it)."""
        bound = self._bound
        if bound is None or bound[0] is not checkpointer or bound[1] is not media:
            graph = self.graph
            program = graph._program.stored_in(checkpointer, media)
            threads = Threads(program, graph._threads.initial)
            bound = self._bound = (checkpointer, media, program, threads)
        return bound[2], bound[3]

    async def __call__(self, state: Any, config: dict[str, Any]) -> AsyncIterator[Any]:
        child = _ChildRun(self, state)
        async for chunk in child.run():
            yield chunk
        yield child.output

    async def _whole_output(self, state: Any, config: dict[str, Any]) -> NodeOutput:
        """The node's output when nothing is streamed."""
        child = _ChildRun(self, state)
        async for _ in child.run():
            pass
        return child.output


class _ChildRun:
    """One run of a subgraph node: find or start the child's thread, run it, say what it
    changed (or pause the parent with the child's question)."""

    def __init__(self, subgraph: Subgraph, given: Any) -> None:
        parent, scope = current_run.get(), current_scope.get()
        if parent is None or scope is None or parent.state is None:
            raise RuntimeError(f"{subgraph!r} runs as a node of a graph (add_node(name, graph))")
        self.parent, self.scope = parent, scope
        self.program, self.threads = subgraph.bound(
            parent.program.checkpointer, parent.program.media
        )
        step = parent.state.execution_meta.step
        self.thread_id = child_thread_id(parent.settings.thread_id, scope.name, step)
        self.messages, self.values = self._input(given)
        self.output = NodeOutput()

    def _input(self, given: Any) -> tuple[list[Message], dict[str, Any]]:
        """The child's input: the conversation and the shared fields' values (copies: the
        child must not change the parent's state in place). Also what the shared fields hold
        at the child's start (`self.before`), to tell which ones it changed."""
        shared = (self.program.fields & self.parent.program.fields) - RESERVED_FIELDS
        if isinstance(given, AgentState):
            values = {name: copy.deepcopy(getattr(given, name)) for name in shared}
            self.before = dict(values)
            return list(given.context), values
        if isinstance(given, dict):  # a Send's payload: the child's fields, its messages
            values = {k: copy.deepcopy(v) for k, v in given.items() if k != "context"}
            initial = self.threads.initial
            self.before = {
                name: values[name] if name in values else getattr(initial, name) for name in shared
            }
            messages = given.get("context") or []
            return [m if isinstance(m, Message) else Message.model_validate(m) for m in messages], (
                values
            )
        raise TypeError(
            f"Subgraph node {self.scope.node!r} was given a {type(given).__name__}; it takes "
            "the state, or a Send payload that is a dict of its fields (`context`: messages)"
        )

    async def run(self) -> AsyncIterator[Any]:
        input_data = await self._resume_or_start()
        final: AgentState | None = None
        command = None
        if input_data is not _MISSING:
            run = self._child(input_data)
            streamed = self.parent.chunks.streamed
            try:
                async for chunk in run.events():
                    message = chunk.message
                    if message is not None and not message.delta:
                        streamed.add(message.message_id)  # the parent need not send it again
                    yield chunk
                final = run.result["state"]
            except ParentCommand as routed:
                final, command = routed.state, routed.command
            finally:
                self.parent.observer.absorb(run.observer)
                self.threads.forget(self.thread_id)  # never run again: keep no copy
        else:
            final = self.done
        meta = final.execution_meta
        if command is None and meta.is_interrupted():
            raise await self._forwarded(meta)
        self._collect(final, command)
        if self.program.checkpointer is not None:  # the parent has it all once it saves
            self.parent.finished_children.append(self.thread_id)

    async def _resume_or_start(self) -> Any:
        """The child run's input: a new run, the answer to the question it paused at, or
        None to continue it (stopped, crashed, failed); `_MISSING` when it had finished."""
        checkpointer = self.program.checkpointer
        if checkpointer is None or await checkpointer.aversion(self.thread_id) is None:
            return {"messages": self.messages, "state": self.values}
        state = await self.threads.stored(self.thread_id)
        meta = state.execution_meta
        if meta.status == ExecutionStatus.COMPLETED:
            self.done = state
            return _MISSING
        if meta.is_interrupted() and meta.interrupt_data:
            answer = await self._answer()
            if answer is _MISSING:  # not answered yet: ask again
                raise await self._forwarded(meta)
            return {"resume": answer}
        return None

    async def _answer(self) -> Any:
        """The parent's answer to the question the child is paused at: the n-th answer given
        to this node for the child's n-th pause (told by its saved versions), if given."""
        answers = self.scope.answers
        if not answers:
            return _MISSING
        checkpointer = self.program.checkpointer
        assert checkpointer is not None
        history = await checkpointer.ahistory(self.thread_id)
        pauses = sum(1 for info in history if info.status.startswith("interrupted"))
        return answers[pauses - 1] if 0 < pauses <= len(answers) else _MISSING

    def _child(self, input_data: Any) -> Run:
        parent = self.parent
        config = {k: v for k, v in parent.settings.node_config.items() if k not in _PARENT_ONLY}
        # a child left held by a process that died is waited for, as long as a run waits
        config.update(thread_id=self.thread_id, multitask_strategy="enqueue")
        settings = RunSettings.from_config(config, bool(parent.want))
        settings.nested = True
        chunks = parent.chunks
        nesting = Nesting((*chunks.namespace, self.scope.name), chunks.thread_id, chunks.run_id)
        run = Run(
            self.program,
            self.threads,
            input_data,
            settings,
            parent.want,
            ResponseGranularity.FULL,
            nesting,
        )
        meter = parent.observer.meter
        if meter is not None:  # the parent's budget holds in the child: one spending
            own = run.observer.meter
            run.observer.meter = (
                meter
                if own is None
                else Meter(meter.within(own.budget), meter.spending, meter.thread)
            )
        return run

    async def _forwarded(self, meta: ExecutionState) -> GraphInterrupt:
        """The child's pause as the parent's: an interrupt of this node, the child's
        question in it (a breakpoint or a stop in the child: resume with any answer)."""
        asked: dict[str, Any] = meta.interrupt_data or {}
        scope: InterruptScope = self.scope
        return GraphInterrupt(
            Interrupt(
                key=f"node:{scope.name}:{len(scope.answers)}",
                node=scope.node,
                value=asked.get("value"),
                message=asked.get("message"),
                reason=asked.get("reason") or meta.interrupt_reason or "input_required",
                response_schema=asked.get("response_schema"),
                tool_call_id=asked.get("tool_call_id"),
            )
        )

    def _collect(self, final: AgentState, command: Any) -> None:
        """What the child changed, as this node's output: the messages it added, the shared
        fields it changed, and a `Command(graph=PARENT)`'s update and goto."""
        output = self.output
        added = final.context[len(self.messages) :]
        output.messages.extend(added)
        if self.parent.want:  # the child streamed them, in this run or before it paused
            self.parent.chunks.streamed.update(m.message_id for m in added)
        for name, before in self.before.items():
            after = getattr(final, name, before)
            if after != before:
                output.fields[name] = after
        if command is not None:
            part = normalize(command.update, self.scope.node, self.parent.program.fields)
            output.messages.extend(part.messages)
            output.fields.update(part.fields)
            goto = command.goto
            if goto is not None:
                output.goto = [goto] if isinstance(goto, str | Send) else list(goto)


__all__ = ["Subgraph", "child_thread_id"]
