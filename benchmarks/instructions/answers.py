"""N model answers (S6's loopback response, as litellm's `ModelResponse`), one piece of their
life counted at a time: `make` (`message_from_response`: the dump, the credential check,
sealing the raw response, the message), `seal` (sealing the answer, as a run's result does),
`encode` (its store row, `encode_message`) or `dump` (litellm's dump of the response alone).

    run() { PYTHONHASHSEED=0 PYTHONPATH=src valgrind --tool=callgrind --collect-atstart=no \
              --callgrind-out-file=/dev/null python "$@" 2>&1 | grep -o 'Collected : [0-9]*'; }
    run benchmarks/instructions/answers.py 200 seal
    run benchmarks/instructions/answers.py 1200 seal
    # (second - first) / 1000: instructions per answer for that piece
"""

import copy
import json
import os
import sys
from pathlib import Path

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before litellm is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenarios"))

import s6_models as s6
from _callgrind import toggler
from litellm.types.utils import ModelResponse

from tenxgraph.core.llm.wire_in import message_from_response
from tenxgraph.core.state.sealed import seal
from tenxgraph.storage.checkpointer.base import encode_message

count, piece = int(sys.argv[1]), sys.argv[2]
body = json.loads(s6.completion_body())
responses = [ModelResponse(**copy.deepcopy(body)) for _ in range(count)]
seal(message_from_response(responses[0], "openai", "bench"))  # first-use set-up, not counted
toggle = toggler()
if piece == "make":
    toggle()
    answers = [message_from_response(r, "openai", "bench") for r in responses]
    toggle()
elif piece == "dump":
    toggle()
    dumps = [r.model_dump() for r in responses]
    toggle()
elif piece in ("seal", "encode"):
    answers = [message_from_response(r, "openai", "bench") for r in responses]
    act = seal if piece == "seal" else encode_message
    toggle()
    for answer in answers:
        act(answer)
    toggle()
else:
    raise SystemExit(f"answers: no piece called {piece!r} (make, seal, encode, dump)")
