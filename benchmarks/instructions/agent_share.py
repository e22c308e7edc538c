"""An Agent step's own instructions as a share of the litellm call it makes (S6's loop).

    valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes \
        --callgrind-out-file=/tmp/cg.%p python benchmarks/instructions/agent_share.py inside 10
    (the same with `outside`), then compare the main thread's totals (`summary.py`, below)

S6's looping graph (an `Agent` calling the loopback server 10 times on an in-memory thread)
runs `N` times after warm-ups, with callgrind collecting only inside `litellm.acompletion`
(`inside`) or only outside it while the runs go (`outside`): the two counts of the event
loop's thread are the litellm calls' instructions and what tenxgraph spends around them, in
the same program, so their ratio is the step's share of the call, which neither the
machine's speed nor its load moves (unlike the CPU time `ab_models.py` measures, where our
code runs with the caches a litellm call left cold). The server is a child process,
which callgrind does not follow. Collection is switched by callgrind's client request, from a
tiny library compiled here with the system's C compiler and valgrind's header.
"""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenarios"))

import s6_models as s6
from _callgrind import toggler

MODE, N = sys.argv[1], int(sys.argv[2])
if MODE not in ("inside", "outside"):
    raise SystemExit("agent_share: the mode is `inside` or `outside`")


toggle = toggler()
server = s6.Server(1)
try:
    _, _, loop = s6.build("tenxgraph", server.api_base)
    import litellm

    real = litellm.acompletion
    collecting = [False]

    async def switched(*args, **kwargs):  # type: ignore[no-untyped-def]
        if collecting[0]:
            toggle()  # inside: on; outside: off
        try:
            return await real(*args, **kwargs)
        finally:
            if collecting[0]:
                toggle()

    litellm.acompletion = switched

    async def main() -> None:
        for _ in range(5):  # warm-ups, not collected
            await loop()
        collecting[0] = True
        if MODE == "outside":
            toggle()
        for _ in range(N):
            if await loop() != s6.LOOP_STEPS:
                raise SystemExit("agent_share: the loop made the wrong number of calls")
        if MODE == "outside":
            toggle()
        collecting[0] = False

    asyncio.run(main())
finally:
    server.stop()
