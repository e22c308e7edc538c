"""N 240-character text messages made and sealed (`seal`), or made, stored as rows, decoded and
sealed (`load`: what reading a thread's messages costs)."""

import sys

from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.sealed import seal
from tenxgraph.storage.checkpointer._codec import decode_messages, encode_message

N = int(sys.argv[1])
ms = [Message.text_message("x" * 240) for _ in range(N)]
if sys.argv[2] == "seal":
    for m in ms:
        seal(m)
else:
    rows = [encode_message(m) for m in ms]
    for m in decode_messages(AgentState, "t", rows):
        seal(m)
