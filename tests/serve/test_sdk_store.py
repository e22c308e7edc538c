"""The long-term store through LangGraph's own client."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError

from tenxgraph import END, START, StateGraph
from tenxgraph.storage.store import InMemoryStore


async def test_put_get_search_delete_and_namespaces(client: LangGraphClient) -> None:
    await client.store.put_item(["users", "ann"], "prefs", {"theme": "dark"})
    await client.store.put_item(["users", "ann"], "lang", {"code": "pt"})
    await client.store.put_item(["users", "bob"], "prefs", {"theme": "light"})
    item = await client.store.get_item(["users", "ann"], "prefs")
    assert item["value"] == {"theme": "dark"}
    assert item["namespace"] == ["users", "ann"]
    assert item["key"] == "prefs"
    found = await client.store.search_items(["users"], filter={"theme": "light"})
    assert [(i["namespace"], i["key"]) for i in found["items"]] == [(["users", "bob"], "prefs")]
    assert len((await client.store.search_items(["users", "ann"]))["items"]) == 2
    assert len((await client.store.search_items(["users"], limit=1))["items"]) == 1
    spaces = await client.store.list_namespaces(prefix=["users"])
    assert sorted(spaces["namespaces"]) == [["users", "ann"], ["users", "bob"]]
    assert (await client.store.list_namespaces(max_depth=1))["namespaces"] == [["users"]]
    await client.store.delete_item(["users", "ann"], "prefs")
    with pytest.raises(NotFoundError):
        await client.store.get_item(["users", "ann"], "prefs")
    assert (await client.store.get_item(["users", "ann"], "lang"))["value"] == {"code": "pt"}


def _bag(texts: list[str]) -> list[list[float]]:
    """Bag-of-words vectors over three words; a text "boom" fails, as a model might."""
    if "boom" in texts:
        raise ConnectionError("the embedding model is down")
    return [
        [float(text.lower().split().count(w)) for w in ("tea", "dog", "rain")] for text in texts
    ]


def _indexed() -> dict[str, Any]:
    """The server's one graph, compiled with a store that embeds the field "text"."""

    def step(state: Any) -> dict[str, Any]:
        return {}

    graph = StateGraph()
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    store = InMemoryStore(index={"dims": 3, "embed": _bag, "fields": ["text"]})
    return {"graphs": {"indexed": graph.compile(name="indexed", store=store)}}


@pytest.mark.parametrize("served", [_indexed()], indirect=True)
async def test_a_query_search_through_the_client(client: LangGraphClient) -> None:
    await client.store.put_item(["notes"], "tea", {"text": "tea at five"})
    await client.store.put_item(["notes"], "dog", {"text": "walk the dog in the rain"})
    await client.store.put_item(["notes"], "hidden", {"text": "tea"}, index=False)
    found = (await client.store.search_items(["notes"], query="tea please"))["items"]
    assert [(i["key"], round(i["score"], 4)) for i in found] == [("tea", 1.0), ("dog", 0.0)]
    with pytest.raises(httpx.HTTPStatusError) as info:
        await client.store.put_item(["notes"], "boom", {"text": "boom"})
    assert info.value.response.status_code == 502
    assert "ConnectionError: the embedding model is down" in info.value.response.text
    plain = (await client.store.search_items(["notes"]))["items"]
    assert [(i["key"], i["score"]) for i in plain] == [
        ("hidden", None),
        ("dog", None),
        ("tea", None),
    ]


async def test_a_query_on_a_server_store_without_an_index_is_a_422(
    client: LangGraphClient,
) -> None:
    with pytest.raises(httpx.HTTPStatusError) as info:
        await client.store.search_items(["notes"], query="tea")
    assert info.value.response.status_code == 422
    assert "needs a store made with an index" in info.value.response.text
