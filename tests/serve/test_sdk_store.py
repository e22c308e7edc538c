"""The long-term store through LangGraph's own client."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError


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
