"""S6: what tenxgraph's `Agent` adds on top of litellm when it calls a real (loopback) model.

    python benchmarks/run.py s6_models --baselines litellm --rounds 5

A small OpenAI-compatible server runs in a separate process (its CPU is not counted) and
answers POST /v1/chat/completions: with ``"stream": true``, a role chunk, 5,000 small
content chunks, a finish chunk and a usage chunk (``choices: []``) as server-sent events,
then ``data: [DONE]``; otherwise one small chat.completion. All answers are encoded once,
up front, so the server costs little.

- framework `litellm` (the floor): bare `litellm.acompletion(model="openai/bench",
  api_base=..., stream=True, stream_options={"include_usage": True}, num_retries=0)`,
  reading every chunk; and plain non-streamed calls.
- framework `tenxgraph`: a one-node graph START -> Agent("openai/bench", api_base=...) -> END
  on an `InMemoryCheckpointer`; the stream is `app.astream(...)` read to the end, the call is
  `app.ainvoke(...)`, each on a fresh thread. Inputs are made before the clock starts, as the
  bare calls' are: one user Message, reused (a run keeps a copy of its input), and thread ids
  from a counter.

Both count the chunks that carry text and fail unless there are exactly 5,000, and check
the assembled answer. Measures (client process only, medians after warm-ups):
stream_cpu_us_per_chunk / stream_wall_us_per_chunk (CPU time from `time.process_time()`,
wall time from `time.perf_counter()`, of a whole stream divided by 5,000) and call_cpu_ms /
call_wall_ms (one non-streamed call: a whole graph run, with its thread checkpointed) and
step_cpu_ms / step_wall_ms (one Agent step inside a run that loops the Agent 10 times,
against 10 bare calls on a growing history: the per-step cost without the per-run one).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from _common import emit, median

CHUNKS = 5_000
LOOP_STEPS = 10  # model calls in one run of the looping graph
MODEL = "openai/bench"
REPLY = "Hello from the bench server."
TOKENS = [f"tok{i} " for i in range(CHUNKS)]
STREAMED_TEXT = "".join(TOKENS)


# -- the server (runs in its own process: `s6_models.py --serve`) ------------------------------


def _sse(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "bench",
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def stream_pieces(batch: int) -> list[bytes]:
    """The whole event stream, pre-encoded, `batch` events per write."""
    events = [_sse({"role": "assistant", "content": ""})]
    events += [_sse({"content": token}) for token in TOKENS]
    events.append(_sse({}, "stop"))
    usage = {"prompt_tokens": 1, "completion_tokens": CHUNKS, "total_tokens": CHUNKS + 1}
    events.append(_sse(None, usage=usage))
    events.append(b"data: [DONE]\n\n")
    return [b"".join(events[i : i + batch]) for i in range(0, len(events), batch)]


def completion_body() -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "bench",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": REPLY},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 6, "total_tokens": 7},
        }
    ).encode()


def serve(batch: int) -> None:
    """Listen on a free loopback port, print it, and answer until terminated."""
    from aiohttp import web

    pieces = stream_pieces(batch)
    body = completion_body()

    async def chat(request: web.Request) -> web.StreamResponse:
        if json.loads(await request.read()).get("stream"):
            response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await response.prepare(request)
            for piece in pieces:
                await response.write(piece)
            await response.write_eof()
            return response
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Server:
    """The server process: started, waited for (by connecting), terminated."""

    def __init__(self, batch: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", "--server-batch", str(batch)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.isdigit():
            self.stop()
            raise SystemExit(f"s6: the bench server did not start: {line!r}\n{self._stderr()}")
        self.port = int(line)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise SystemExit(
                        f"s6: the bench server is not answering\n{self._stderr()}"
                    ) from None
                time.sleep(0.01)
        self.api_base = f"http://127.0.0.1:{self.port}/v1"

    def _stderr(self) -> str:
        try:
            return self.proc.communicate(timeout=5)[1][-3000:]
        except Exception:  # best effort, for the error message only
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- the clients ---------------------------------------------------------------------------------

Stream = Callable[[], Awaitable[tuple[int, str]]]  # -> (text chunks seen, assembled text)
Call = Callable[[], Awaitable[str]]  # -> the answer's text
Loop = Callable[[], Awaitable[int]]  # -> answers produced by one run of the looping graph


def build(framework: str, api_base: str) -> tuple[Stream, Call, Loop]:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before litellm is imported
    if framework == "litellm":
        import litellm

        litellm.suppress_debug_info = True
        messages = [{"role": "user", "content": "hi"}]
        settings = {"model": MODEL, "api_base": api_base, "api_key": "x", "num_retries": 0}

        async def stream_litellm() -> tuple[int, str]:
            stream = await litellm.acompletion(
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                **settings,
            )
            count = 0
            parts = []
            usage = None
            async for chunk in stream:
                choices = chunk.choices
                if choices:
                    text = choices[0].delta.content
                    if text:
                        count += 1
                        parts.append(text)
                else:
                    # the include_usage chunk; looked for only here, as reading a missing
                    # attribute of litellm's chunk objects costs about 3 us
                    usage = getattr(chunk, "usage", None)
            if usage is None:
                raise SystemExit("s6: litellm stream ended without a usage chunk")
            return count, "".join(parts)

        async def call_litellm() -> str:
            response = await litellm.acompletion(messages=messages, **settings)
            return response.choices[0].message.content  # type: ignore[no-any-return]

        async def loop_litellm() -> int:
            history = list(messages)
            for _ in range(LOOP_STEPS):
                response = await litellm.acompletion(messages=history, **settings)
                answer = response.choices[0].message.content
                history.append({"role": "assistant", "content": answer})
            return len(history) - 1

        return stream_litellm, call_litellm, loop_litellm

    if framework != "tenxgraph":
        raise SystemExit(f"s6: unknown framework {framework!r} (litellm or tenxgraph)")
    from tenxgraph.core.graph import Agent, StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils.constants import END, START

    g = StateGraph()
    g.add_node("agent", Agent(MODEL, api_base=api_base, api_key="x"))
    g.add_edge(START, "agent")
    g.add_edge("agent", END)
    app = g.compile(checkpointer=InMemoryCheckpointer())

    # Inputs are made ahead, as the bare calls' messages are: the same user Message each
    # time (a run keeps a copy of its input, never the caller's object) and a new thread id
    # from a counter (a uuid4 would cost more than some of the steps measured)
    question = Message.text_message("hi")
    threads = (f"bench-{uuid.uuid4().hex[:8]}-{i}" for i in itertools.count())

    def turn() -> tuple[dict[str, Any], dict[str, Any]]:
        return {"messages": [question]}, {"thread_id": next(threads)}

    async def stream_tenxgraph() -> tuple[int, str]:
        count = 0
        final: Message | None = None
        async for chunk in app.astream(*turn()):
            message = chunk.message
            if message is None:
                continue
            if message.delta:
                if message.text():
                    count += 1
            elif message.role == "assistant":
                final = message
        if final is None or final.usages is None:
            raise SystemExit("s6: the tenxgraph stream ended without a final message with usage")
        return count, final.text()

    async def call_tenxgraph() -> str:
        result = await app.ainvoke(*turn())
        return result["messages"][-1].text()  # type: ignore[no-any-return]

    def again(state: Any) -> str:
        # the history is the question and one answer per step: counted in O(1), as the bare
        # loop counts its calls (scanning the history would time this function, not ours)
        answers = len(state.context) - 1
        return "agent" if answers < LOOP_STEPS else END

    looping = StateGraph()
    looping.add_node("agent", Agent(MODEL, api_base=api_base, api_key="x"))
    looping.add_edge(START, "agent")
    looping.add_conditional_edges("agent", again, {"agent": "agent", END: END})
    loop_app = looping.compile(checkpointer=InMemoryCheckpointer())

    async def loop_tenxgraph() -> int:
        result = await loop_app.ainvoke(*turn())
        return len(result["messages"]) - 1

    return stream_tenxgraph, call_tenxgraph, loop_tenxgraph


async def measure(
    framework: str, api_base: str, streams: int, calls: int, warmups: int
) -> dict[str, float]:
    stream, call, loop = build(framework, api_base)

    async def one_stream() -> tuple[float, float]:
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        count, text = await stream()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if count != CHUNKS or text != STREAMED_TEXT:
            raise SystemExit(
                f"s6 {framework}: expected {CHUNKS} text chunks making {len(STREAMED_TEXT)} "
                f"characters, got {count} chunks making {len(text)}"
            )
        return cpu / CHUNKS * 1e6, wall / CHUNKS * 1e6

    async def one_call() -> tuple[float, float]:
        cpu, wall = time.process_time(), time.perf_counter()
        text = await call()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if text != REPLY:
            raise SystemExit(f"s6 {framework}: expected the answer {REPLY!r}, got {text!r}")
        return cpu * 1e3, wall * 1e3

    await one_stream()  # warm-up: imports, client caches, connection pool
    stream_runs = [await one_stream() for _ in range(streams)]
    for _ in range(warmups):
        await one_call()
    gc.collect()
    call_runs = [await one_call() for _ in range(calls)]
    loop_runs = []
    for _ in range(max(3, calls // (2 * LOOP_STEPS))):
        cpu, wall = time.process_time(), time.perf_counter()
        answers = await loop()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if answers != LOOP_STEPS:
            raise SystemExit(f"s6 {framework}: expected {LOOP_STEPS} answers, got {answers}")
        loop_runs.append((cpu / LOOP_STEPS * 1e3, wall / LOOP_STEPS * 1e3))
    paired = await paired_call_added(framework, api_base, call, loop, calls)
    paired.update(await paired_stream_added(framework, api_base, stream, streams))
    return {
        **paired,
        "stream_cpu_us_per_chunk": median([c for c, _ in stream_runs]),
        "stream_wall_us_per_chunk": median([w for _, w in stream_runs]),
        "call_cpu_ms": median([c for c, _ in call_runs]),
        "call_wall_ms": median([w for _, w in call_runs]),
        "step_cpu_ms": median([c for c, _ in loop_runs]),
        "step_wall_ms": median([w for _, w in loop_runs]),
    }


def timed(
    acompletion: Callable[..., Awaitable[Any]],
) -> tuple[list[float], Callable[..., Awaitable[Any]]]:
    """`acompletion` wrapped to add the CPU (of the event loop's thread) spent inside each
    call to the returned counter's `[0]`, which the caller resets; for a stream, also the CPU
    spent inside each read of a chunk."""
    inside = [0.0]

    async def timed_acompletion(*args: Any, **kwargs: Any) -> Any:
        cpu = time.thread_time()
        try:
            answer = await acompletion(*args, **kwargs)
        finally:
            inside[0] += time.thread_time() - cpu
        return TimedStream(answer, inside) if kwargs.get("stream") else answer

    return inside, timed_acompletion


class TimedStream:
    """A litellm stream whose chunk reads add their CPU (of this thread) to `inside[0]`."""

    def __init__(self, stream: Any, inside: list[float]) -> None:
        self._stream = stream
        self._chunks = stream.__aiter__()
        self._inside = inside

    def __aiter__(self) -> TimedStream:
        return self

    async def __anext__(self) -> Any:
        cpu = time.thread_time()
        try:
            return await self._chunks.__anext__()
        finally:
            self._inside[0] += time.thread_time() - cpu

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


async def paired_stream_added(
    framework: str, api_base: str, stream: Stream, pairs: int
) -> dict[str, float]:
    """What tenxgraph's stream adds per chunk over a bare litellm stream, from `pairs` pairs
    of whole streams run back to back in this process in alternating order (medians of the
    pairs; the two-process figure moves with the machine by tens of percent):

    - `own_stream_us_per_chunk`, `own_stream_pct_of_bare`: the CPU (of the event loop's
      thread) our stream spends outside litellm (the call and every chunk read, both sides
      reading through the same timing wrapper) beyond what the bare loop spends outside it
      (`bare_stream_outside_us_per_chunk`: reading each chunk's text, and the wrapper's own
      cost, which is the same on both sides), per chunk and as a percentage of the bare
      stream's CPU: tenxgraph's own code only. litellm's CPU per stream varies by +-20% from
      one stream to the next, which the difference below carries whole.
    - `paired_stream_added_pct`: (ours - bare) / bare process CPU (all threads), in percent.

    The litellm framework reports 0."""
    names = (
        "paired_stream_added_pct",
        "own_stream_us_per_chunk",
        "own_stream_pct_of_bare",
        "bare_stream_outside_us_per_chunk",
    )
    if framework != "tenxgraph":
        return dict.fromkeys(names, 0.0)
    import litellm

    bare_stream, _, _ = build("litellm", api_base)
    await bare_stream()  # warm-up
    acompletion = litellm.acompletion
    inside, litellm.acompletion = timed(acompletion)
    added, own, share, bare_outside = [], [], [], []
    try:
        for i in range(pairs):
            order = (bare_stream, stream) if i % 2 == 0 else (stream, bare_stream)
            spent, thread, outside = {}, {}, {}
            for one in order:
                gc.collect()
                inside[0] = 0.0
                cpu, thread_cpu = time.process_time(), time.thread_time()
                await one()
                spent[one] = time.process_time() - cpu
                thread[one] = time.thread_time() - thread_cpu
                outside[one] = thread[one] - inside[0]
            # what our stream does outside litellm beyond what the bare loop does there (it
            # reads each chunk's text; the timing wrapper's own cost is the same on both)
            own.append(outside[stream] - outside[bare_stream])
            bare_outside.append(outside[bare_stream])
            added.append((spent[stream] - spent[bare_stream]) / spent[bare_stream] * 100)
            share.append(own[-1] / thread[bare_stream] * 100)
    finally:
        litellm.acompletion = acompletion
    return {
        "paired_stream_added_pct": median(added),
        "own_stream_us_per_chunk": median(own) / CHUNKS * 1e6,
        "own_stream_pct_of_bare": median(share),
        "bare_stream_outside_us_per_chunk": median(bare_outside) / CHUNKS * 1e6,
    }


async def paired_call_added(
    framework: str, api_base: str, call: Call, loop: Loop, calls: int
) -> dict[str, float]:
    """CPU ms (of the event loop's thread) that tenxgraph adds over one bare litellm call,
    for four layers: the Agent's model client alone (request and answer conversion), a
    one-node graph without a checkpointer, the same graph keeping its thread in memory, and
    per Agent step a run of the looping graph (thread in memory) against 10 bare calls on a
    growing history, divided by 10. Two figures per layer, both from pairs run back to back
    in this process in alternating order (medians):

    - `paired_*_added_cpu_ms`: ours minus the bare call's CPU. Far less noisy than comparing
      two processes, but it still subtracts two separate litellm calls, whose own CPU varies
      by several percent from one call to the next.
    - `own_*_cpu_ms`: ours minus the CPU spent inside `litellm.acompletion` during it, i.e.
      tenxgraph's own code only. It estimates the same thing without the second call's
      noise, as both sides send litellm the same request (the same messages and settings)
      and get the same answer, so litellm's share is the same work.
    - `own_*_pct_of_bare`: that own CPU as a percentage of the bare call's (or the 10 bare
      calls') CPU in the same pair: the figure that does not move with the machine's speed.

    Also the bare call's own CPU in those pairs, for scale (the machine's speed moves both).
    The litellm framework reports 0, so the table's "added" column shows tenxgraph's
    figures."""
    layer_names = ("client", "graph", "call", "step")
    names = [f"paired_{n}_added_cpu_ms" for n in layer_names]
    names += [f"own_{n}_cpu_ms" for n in layer_names]
    names += [f"own_{n}_pct_of_bare" for n in layer_names]
    if framework != "tenxgraph":
        return dict.fromkeys((*names, "paired_bare_litellm_cpu_ms"), 0.0)
    import litellm

    from tenxgraph.core.graph import Agent, StateGraph
    from tenxgraph.core.llm import LiteLLMClient, ModelRequest
    from tenxgraph.core.state import Message
    from tenxgraph.utils.constants import END, START

    _, bare, bare_loop = build("litellm", api_base)
    client = LiteLLMClient()
    question = Message.text_message("hi")
    threads = (f"paired-{i}" for i in itertools.count())
    request = ModelRequest(MODEL, [question], settings={"api_base": api_base, "api_key": "x"})

    async def client_call() -> str:
        return (await client.acomplete(request)).text()

    graph = StateGraph()
    graph.add_node("agent", Agent(MODEL, api_base=api_base, api_key="x"))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    bare_app = graph.compile(checkpointer=False)  # keeps nothing (not even the default store)

    async def graph_call() -> str:
        result = await bare_app.ainvoke({"messages": [question]}, {"thread_id": next(threads)})
        return result["messages"][-1].text()  # type: ignore[no-any-return]

    acompletion = litellm.acompletion
    inside, timed_acompletion = timed(acompletion)
    layers: tuple[tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]], int], ...]
    layers = ((client_call, bare, calls), (graph_call, bare, calls), (call, bare, calls))
    layers += ((loop, bare_loop, max(20, calls // 2)),)  # 10 steps a pair: fewer pairs
    figures = {}
    floor_cpu = []
    litellm.acompletion = timed_acompletion  # both sides call through it: the same cost
    try:
        for name, (ours, floor, pairs) in zip(layer_names, layers, strict=True):
            differences, own, share = [], [], []
            for i in range(pairs):
                order = (floor, ours) if i % 2 == 0 else (ours, floor)  # neither always first
                spent = {}
                for one in order:
                    inside[0] = 0.0
                    cpu = time.thread_time()  # litellm's logging threads do the same work
                    await one()  # for both and would only add noise
                    spent[one] = time.thread_time() - cpu
                    if one is ours:
                        own.append((spent[one] - inside[0]) * 1e3)
                differences.append((spent[ours] - spent[floor]) * 1e3)
                share.append(own[-1] / (spent[floor] * 1e3) * 100)  # of this pair's bare call
                if floor is bare:
                    floor_cpu.append(spent[floor] * 1e3)
            figures[f"paired_{name}_added_cpu_ms"] = median(differences)
            figures[f"own_{name}_cpu_ms"] = median(own)
            figures[f"own_{name}_pct_of_bare"] = median(share)
    finally:
        litellm.acompletion = acompletion
    figures["paired_step_added_cpu_ms"] /= LOOP_STEPS
    figures["own_step_cpu_ms"] /= LOOP_STEPS
    figures["paired_bare_litellm_cpu_ms"] = median(floor_cpu)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", help="litellm (the floor) or tenxgraph")
    parser.add_argument("--streams", type=int, default=5, help="measured streams (after one)")
    parser.add_argument("--calls", type=int, default=200, help="measured non-streamed calls")
    parser.add_argument("--warmups", type=int, default=10, help="unmeasured calls first")
    parser.add_argument(
        "--server-batch", type=int, default=1, help="server: stream events per socket write"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.server_batch)
        return
    if not args.framework:
        parser.error("--framework is required")
    server = Server(args.server_batch)
    try:
        measures = asyncio.run(
            measure(args.framework, server.api_base, args.streams, args.calls, args.warmups)
        )
    finally:
        server.stop()
    emit(measures)


if __name__ == "__main__":
    main()
