"""What a long thread with images costs on disk: a 200-turn thread with a 2 MB image in every
tenth turn is stored in at most 1.1x the size of its text plus one copy of each distinct
image (the images are offloaded to the media store, each kept once, not inline base64 in
every checkpoint: 20 inline copies would take about 55 MB)."""

from __future__ import annotations

import base64
import os
import sqlite3
from pathlib import Path

from tenxgraph import Message, StateGraph
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils.constants import END, START

TURNS = 200
IMAGE_BYTES = 2 * 1024 * 1024


def answer(state: object) -> str:
    return "An answer of some length, as a model would give. " * 20  # 1,000 characters


async def test_a_long_thread_with_images_stays_small_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    checkpointer = SqliteCheckpointer(path)
    graph = StateGraph()
    graph.add_node("answer", answer)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", END)
    app = graph.compile(checkpointer=checkpointer)
    images = [os.urandom(IMAGE_BYTES) for _ in range(4)]  # each sent 5 times
    config = {"thread_id": "long"}
    question = "A question about the picture and what came before. " * 20
    for turn in range(TURNS):
        if turn % 10 == 0:
            data = base64.b64encode(images[turn // 10 % 4]).decode()
            message = Message.image_message(image_base64=data, mime_type="image/png", text=question)
        else:
            message = Message.text_message(question)
        await app.ainvoke({"messages": [message]}, config)
    state = await checkpointer.aget_state(config)
    assert state is not None
    assert len(state.context) == 2 * TURNS
    text = sum(len(m.text().encode()) for m in state.context)
    assert app.media_store is not None
    await app.media_store.aclose()
    await checkpointer.aclose()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    conn.close()
    on_disk = path.stat().st_size
    budget = 1.1 * (text + len(images) * IMAGE_BYTES)
    assert on_disk <= budget, f"{on_disk:,} bytes on disk, over {budget:,.0f}"
