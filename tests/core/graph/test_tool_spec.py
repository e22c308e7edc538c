"""Tool specs: `@tool` metadata, the schema the model sees, and argument validation."""

from __future__ import annotations

import dataclasses
import enum
import functools
import gc
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
import typing_extensions
from pydantic import BaseModel, Field, ValidationError

import tenxgraph.core.graph.tool_spec as tool_spec_module
from tenxgraph.core.graph.tool_spec import INJECTED, ToolSpec, tool_spec
from tenxgraph.utils import tool
from tenxgraph.utils.decorators import ToolInfo


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    """A postal address."""

    street: str
    title: str = "home"  # a *property* called "title": must survive the title cleaning


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = []


class Cat(BaseModel):
    kind: Literal["cat"] = "cat"
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"] = "dog"
    bark: str


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Span(typing_extensions.TypedDict):
    start: int
    end: int


class OldSpan(typing.TypedDict):  # pydantic refuses typing.TypedDict before Python 3.12
    start: int


class Client:
    """Not JSON-schema-able: a dependency, not something the model sends."""


def params(spec: ToolSpec) -> dict[str, Any]:
    parameters: dict[str, Any] = spec.schema["function"]["parameters"]
    return parameters


def walk(node: Any) -> list[dict[str, Any]]:
    """Every schema object under `node` (properties maps are walked through, not returned)."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for key, value in node.items():
            if key == "properties":
                for prop in value.values():
                    found += walk(prop)
            elif key != "default":
                found += walk(value)
    elif isinstance(node, list):
        for item in node:
            found += walk(item)
    return found


# ---------------------------------------------------------------------------- @tool


def test_bare_tool_returns_the_same_function_with_empty_metadata() -> None:
    def search(query: str) -> str:
        return query.upper()

    assert tool(search) is search
    assert search("a") == "A"
    assert search.__tenxgraph_tool__ == ToolInfo(None, None, frozenset())  # type: ignore[attr-defined]


def test_tool_with_arguments_attaches_metadata_and_keeps_async_functions_async() -> None:
    @tool(name="web-search", description="Search.", tags=("net", "net", "slow"))
    async def search(query: str) -> str:
        return query

    info = search.__tenxgraph_tool__  # type: ignore[attr-defined]
    assert info == ToolInfo("web-search", "Search.", frozenset({"net", "slow"}))
    assert tool_spec(search).is_async
    with pytest.raises(AttributeError):
        info.name = "other"  # frozen


async def test_decorated_async_function_is_still_awaitable() -> None:
    @tool()
    async def double(x: int) -> int:
        return 2 * x

    assert await double(4) == 8


def test_tool_tags_must_be_an_iterable_of_str() -> None:
    with pytest.raises(TypeError, match="iterable of str"):
        tool(tags="net")
    with pytest.raises(TypeError, match="str tags"):
        tool(tags=["net", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="iterable of str"):
        tool(tags=5)  # type: ignore[arg-type]


def test_tool_refuses_bad_names_descriptions_and_targets() -> None:
    with pytest.raises(ValueError, match=r"\^\[a-zA-Z0-9_-\]\{1,64\}\$"):
        tool(name="web search")
    with pytest.raises(ValueError, match="invalid tool name"):
        tool(name="x" * 65)
    with pytest.raises(ValueError, match="invalid tool name"):
        tool(name="search\n")
    with pytest.raises(TypeError, match="description"):
        tool(description=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"@tool\(name='search'\)"):
        tool("search")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="decorate the function itself"):
        tool(Shop().buy)


def test_tool_is_exported_from_utils() -> None:
    import tenxgraph.utils

    assert "tool" in tenxgraph.utils.__all__
    assert tenxgraph.utils.tool is tool


# ---------------------------------------------------------------------------- the schema


def search_orders(
    customer: str,
    address: Address,
    color: Color = Color.RED,
    mode: Literal["fast", "slow"] = "fast",
    limit: int | None = None,
    tags: list[str] | None = None,
    weights: dict[str, float] | None = None,
    count: Annotated[int, Field(description="From Field.", ge=0)] = 10,
    title: str = "t",
    anything=None,  # type: ignore[no-untyped-def]
) -> str:
    """Search   the orders
    of a customer.

    Args:
        customer: The customer's
            id, as shown on the invoice.
        address (Address): Where they live.
        count: Docstring loses to Field.
    """
    return customer


def test_schema_has_the_openai_function_shape() -> None:
    spec = tool_spec(search_orders)
    assert spec.name == "search_orders"
    assert spec.description == "Search the orders of a customer."
    assert spec.schema["type"] == "function"
    assert set(spec.schema["function"]) == {"name", "description", "parameters"}
    assert spec.schema["function"]["name"] == "search_orders"
    assert spec.schema["function"]["description"] == spec.description
    p = params(spec)
    assert p["type"] == "object"
    assert p["additionalProperties"] is False
    assert p["required"] == ["customer", "address"]  # defaults are not required
    assert list(p["properties"]) == [
        "customer",
        "address",
        "color",
        "mode",
        "limit",
        "tags",
        "weights",
        "count",
        "title",
        "anything",
    ]


def test_schema_has_no_titles_defs_or_refs_but_keeps_a_property_called_title() -> None:
    p = params(tool_spec(search_orders))
    nodes = walk(p)
    assert all("title" not in node for node in nodes)
    assert all("$ref" not in node and "$defs" not in node for node in nodes)
    assert p["properties"]["title"] == {"default": "t", "type": "string"}
    assert set(p["properties"]["address"]["properties"]) == {"street", "title"}


def test_schema_per_type() -> None:
    props = params(tool_spec(search_orders))["properties"]
    assert props["customer"] == {
        "type": "string",
        "description": "The customer's id, as shown on the invoice.",
    }
    address = props["address"]
    assert address["type"] == "object"
    assert address["required"] == ["street"]
    assert address["description"] == "Where they live."  # the argument's text beats the class doc
    assert props["color"]["enum"] == ["red", "blue"]
    assert props["color"]["default"] == "red"
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert props["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert props["limit"]["default"] is None
    assert {"type": "array", "items": {"type": "string"}} in props["tags"]["anyOf"]
    assert {"type": "object", "additionalProperties": {"type": "number"}} in props["weights"][
        "anyOf"
    ]
    assert props["count"]["description"] == "From Field."  # explicit Field wins over docstring
    assert props["count"]["minimum"] == 0
    assert props["anything"] == {"default": None}  # no annotation: Any


def test_model_param_without_argument_text_keeps_its_class_description() -> None:
    def ship(to: Address) -> None:
        """Ship."""

    assert params(tool_spec(ship))["properties"]["to"]["description"] == "A postal address."


def test_recursive_model_keeps_defs_for_the_recursion_only() -> None:
    def plant(tree: TreeNode) -> None:
        """Plant a tree."""

    p = params(tool_spec(plant))
    tree = p["properties"]["tree"]
    assert tree["type"] == "object"
    assert tree["properties"]["children"]["items"] == {"$ref": "#/$defs/TreeNode"}
    assert set(p["$defs"]) == {"TreeNode"}
    assert p["$defs"]["TreeNode"]["properties"]["label"] == {"type": "string"}
    assert all("title" not in node for node in walk(p))


def test_parameter_names_that_clash_with_pydantic_work() -> None:
    def query(schema: str, model_config: int = 1, json: bool = False) -> None:
        """Query."""

    spec = tool_spec(query)
    assert list(params(spec)["properties"]) == ["schema", "model_config", "json"]
    assert spec.validate({"schema": "s"}) == {"schema": "s", "model_config": 1, "json": False}


def test_unions_dataclasses_typed_dicts_and_field_defaults() -> None:
    def draw(
        pet: Annotated[Cat | Dog, Field(discriminator="kind")],
        at: Point,
        span: Span | None = None,
        scale: float = Field(1.0, description="Zoom.", gt=0),
        layers: list[int] = Field(default_factory=list),  # noqa: B008 - the form under test
    ) -> None:
        """Draw."""

    spec = tool_spec(draw)
    p = params(spec)
    assert p["required"] == ["pet", "at"]
    pet = p["properties"]["pet"]
    assert "discriminator" not in pet  # OpenAPI, and its mapping pointed into $defs
    assert [choice["properties"]["kind"]["const"] for choice in pet["oneOf"]] == ["cat", "dog"]
    assert p["properties"]["at"]["properties"] == {
        "x": {"type": "integer"},
        "y": {"default": 0, "type": "integer"},
    }
    assert p["properties"]["scale"] == {
        "default": 1.0,
        "description": "Zoom.",
        "exclusiveMinimum": 0,
        "type": "number",
    }
    assert all("$ref" not in node and "title" not in node for node in walk(p))
    kwargs = spec.validate(
        {"pet": {"kind": "dog", "bark": "woof"}, "at": {"x": 1}, "span": {"start": 1, "end": 2}}
    )
    assert kwargs == {
        "pet": Dog(bark="woof"),
        "at": Point(1, 0),
        "span": {"start": 1, "end": 2},
        "scale": 1.0,
        "layers": [],
    }
    with pytest.raises(ValidationError, match="scale"):
        spec.validate({"pet": {"kind": "cat", "lives": 9}, "at": {"x": 1}, "scale": 0})


# ---------------------------------------------------------------------------- docstrings


def test_google_docstring_with_arguments_header_and_typed_entries() -> None:
    def f(a: int, b: str, c: bool = False) -> None:
        """Do the thing.

        Arguments:
            a (int): First
                number.

            b (str, optional): Second.
            c: Third.

        Returns:
            Nothing, really.
        """

    spec = tool_spec(f)
    props = params(spec)["properties"]
    assert spec.description == "Do the thing."
    assert [props[k]["description"] for k in "abc"] == ["First number.", "Second.", "Third."]


def test_sphinx_docstring() -> None:
    def f(a: int, b: str) -> None:
        """Do the
        thing.

        :param a: First
            number.
        :type a: int
        :param str b: Second.
        :returns: nothing.
        """

    spec = tool_spec(f)
    props = params(spec)["properties"]
    assert spec.description == "Do the thing."
    assert props["a"]["description"] == "First number."
    assert props["b"]["description"] == "Second."


def test_numpy_docstring() -> None:
    def f(a: int, b: str, c: float = 1.0) -> None:
        """Do the thing.

        Parameters
        ----------
        a : int
            First
            number.
        b, c : str
            Shared.

        Returns
        -------
        None
            Not a parameter.
        """

    spec = tool_spec(f)
    props = params(spec)["properties"]
    assert spec.description == "Do the thing."
    assert props["a"]["description"] == "First number."
    assert props["b"]["description"] == props["c"]["description"] == "Shared."


def test_no_docstring_gives_an_empty_description() -> None:
    def f(a: int) -> None:
        pass

    spec = tool_spec(f)
    assert spec.description == ""
    assert params(spec)["properties"]["a"] == {"type": "integer"}


def test_tool_metadata_overrides_name_description_and_tags() -> None:
    @tool(name="find", description="Custom.", tags=["db"])
    def search(query: str) -> None:
        """From the docstring.

        Args:
            query: What to find.
        """

    spec = tool_spec(search)
    assert (spec.name, spec.description, spec.tags) == ("find", "Custom.", frozenset({"db"}))
    assert spec.schema["function"]["name"] == "find"
    assert spec.schema["function"]["description"] == "Custom."
    assert params(spec)["properties"]["query"]["description"] == "What to find."


# ---------------------------------------------------------------------------- injected


def test_injected_parameters_are_left_out_and_recorded() -> None:
    def lookup(
        query: str,
        state: Any,
        config: dict[str, Any],
        store: Any,
        tool_call_id: str,
        idempotency_key: str,
    ) -> None:
        """Look up."""

    spec = tool_spec(lookup)
    assert frozenset({"state", "config", "store", "tool_call_id", "idempotency_key"}) == INJECTED
    assert spec.injected == INJECTED
    assert list(params(spec)["properties"]) == ["query"]
    assert params(spec)["required"] == ["query"]
    assert spec.validate({"query": "q"}) == {"query": "q"}
    with pytest.raises(ValidationError, match="state"):
        spec.validate({"query": "q", "state": {}})  # the model cannot set them
    assert tool_spec(search_orders).injected == frozenset()


def test_only_the_injected_parameters_the_function_takes_are_recorded() -> None:
    def lookup(config: dict[str, Any]) -> None:
        """Look up."""

    spec = tool_spec(lookup)
    assert spec.injected == frozenset({"config"})
    assert params(spec)["properties"] == {}
    assert params(spec)["required"] == []


# ---------------------------------------------------------------------------- validate


def test_validate_converts_and_fills_defaults() -> None:
    kwargs = tool_spec(search_orders).validate(
        {"customer": "c1", "address": {"street": "Main"}, "color": "blue", "limit": "3"}
    )
    assert kwargs == {
        "customer": "c1",
        "address": Address(street="Main"),
        "color": Color.BLUE,
        "mode": "fast",
        "limit": 3,
        "tags": None,
        "weights": None,
        "count": 10,
        "title": "t",
        "anything": None,
    }
    assert isinstance(kwargs["address"], Address)
    assert kwargs["color"] is Color.BLUE
    assert search_orders(**kwargs) == "c1"


def test_validate_wrong_type_names_the_parameter() -> None:
    spec = tool_spec(search_orders)
    with pytest.raises(ValidationError) as caught:
        spec.validate({"customer": "c", "address": {"street": "s"}, "limit": "many"})
    assert [e["loc"][0] for e in caught.value.errors()] == ["limit"]
    assert "limit" in str(caught.value)
    assert "search_orders" in str(caught.value)
    with pytest.raises(ValidationError, match="color"):
        spec.validate({"customer": "c", "address": {"street": "s"}, "color": "green"})
    with pytest.raises(ValidationError, match="mode"):
        spec.validate({"customer": "c", "address": {"street": "s"}, "mode": "medium"})
    with pytest.raises(ValidationError, match="count"):
        spec.validate({"customer": "c", "address": {"street": "s"}, "count": -1})


def test_validate_rejects_unknown_and_missing_arguments() -> None:
    spec = tool_spec(search_orders)
    with pytest.raises(ValidationError) as caught:
        spec.validate({"customer": "c", "address": {"street": "s"}, "colour": "red"})
    assert [(e["loc"], e["type"]) for e in caught.value.errors()] == [
        (("colour",), "extra_forbidden")
    ]
    with pytest.raises(ValidationError) as caught:
        spec.validate({"customer": "c"})
    assert [(e["loc"], e["type"]) for e in caught.value.errors()] == [(("address",), "missing")]
    with pytest.raises(ValidationError):
        spec.validate({"p0": "c", "address": {"street": "s"}})  # internal field names are not names


# ---------------------------------------------------------------------------- errors


def test_names_must_follow_the_providers_rule() -> None:
    with pytest.raises(ValueError, match=r"invalid tool name '<lambda>'.*\{1,64\}"):
        tool_spec(lambda x: x)
    named = tool(name="double")(lambda x: 2 * x)
    assert tool_spec(named).name == "double"

    def ok_name_123(x: int) -> None: ...

    assert tool_spec(ok_name_123).name == "ok_name_123"


def test_var_args_and_positional_only_are_refused() -> None:
    def star(query: str, *args: str) -> None: ...

    def double_star(query: str, **kwargs: str) -> None: ...

    def positional(query: str, /) -> None: ...

    with pytest.raises(TypeError, match=r"'star': \*args is not supported.*named parameters"):
        tool_spec(star)
    with pytest.raises(TypeError, match=r"\*\*kwargs is not supported"):
        tool_spec(double_star)
    with pytest.raises(TypeError, match="positional-only query"):
        tool_spec(positional)


def test_a_required_parameter_without_a_json_schema_names_tool_and_parameter() -> None:
    def connect(host: str, client: Client) -> None: ...

    with pytest.raises(TypeError, match=r"tool 'connect': parameter 'client' has type"):
        tool_spec(connect)

    def callback(on_done: Callable[[], None]) -> None: ...

    with pytest.raises(TypeError, match="parameter 'on_done'"):
        tool_spec(callback)


def test_an_optional_parameter_without_a_json_schema_is_hidden_from_the_model() -> None:
    def connect(host: str, client: Client | None = None) -> None: ...

    spec = tool_spec(connect)
    assert list(params(spec)["properties"]) == ["host"]
    assert spec.validate({"host": "h"}) == {"host": "h"}
    with pytest.raises(ValidationError):
        spec.validate({"host": "h", "client": None})


def test_an_optional_parameter_pydantic_refuses_for_another_reason_is_an_error() -> None:
    def measure(span: OldSpan | None = None) -> None: ...

    with pytest.raises(TypeError, match=r"tool 'measure': parameter 'span'.*TypedDict"):
        tool_spec(measure)


def test_unresolvable_hints_and_non_tools_are_refused() -> None:
    def broken(x: Undefined) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    with pytest.raises(TypeError, match="tool 'broken': cannot resolve its type hints"):
        tool_spec(broken)
    with pytest.raises(TypeError, match="callable object"):
        tool_spec(Shop)
    with pytest.raises(TypeError, match="callable object"):
        tool_spec(3)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- callables


class Shop:
    def buy(self, item: str, quantity: int = 1) -> str:
        """Buy an item.

        Args:
            item: What to buy.
        """
        return f"{quantity} {item}"


class Weather:
    """Tells the weather."""

    async def __call__(self, city: str) -> str:
        """
        Args:
            city: The city.
        """
        return city


class Stateless:
    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]

    def __call__(self, x: int) -> int:
        return x


async def fetch(url: str, lang: str, retries: int = 1) -> str:
    """Fetch a page."""
    return url


def test_bound_method_leaves_out_self() -> None:
    spec = tool_spec(Shop().buy)
    assert spec.name == "buy"
    assert spec.description == "Buy an item."
    assert list(params(spec)["properties"]) == ["item", "quantity"]
    assert params(spec)["properties"]["item"]["description"] == "What to buy."
    assert not spec.is_async


def test_callable_object_uses_call_and_class_name() -> None:
    spec = tool_spec(Weather())
    assert spec.name == "weather"
    assert spec.description == "Tells the weather."  # __call__ has no summary: the class doc
    assert params(spec)["properties"]["city"] == {"type": "string", "description": "The city."}
    assert spec.is_async


def test_tool_on_a_class_names_its_instances() -> None:
    @tool(name="forecast", tags=["weather"])
    class Forecast:
        def __call__(self, city: str) -> str:
            return city

    spec = tool_spec(Forecast())
    assert (spec.name, spec.tags) == ("forecast", frozenset({"weather"}))


def test_partial_hides_bound_keywords_and_keeps_the_inner_name_and_asyncness() -> None:
    spec = tool_spec(functools.partial(fetch, lang="en"))
    assert spec.name == "fetch"
    assert spec.description == "Fetch a page."
    assert list(params(spec)["properties"]) == ["url", "retries"]
    assert spec.is_async
    assert spec.validate({"url": "u"}) == {"url": "u", "retries": 1}


def test_partial_of_a_decorated_function_keeps_its_metadata() -> None:
    @tool(name="get_page", tags=["net"])
    def get(url: str, timeout: float) -> str:
        return url

    spec = tool_spec(functools.partial(get, timeout=1.0))
    assert (spec.name, spec.tags) == ("get_page", frozenset({"net"}))


def test_sync_and_async_detection() -> None:
    def sync_tool(x: int) -> int:
        return x

    async def async_tool(x: int) -> int:
        return x

    @functools.wraps(async_tool)
    async def wrapped(*args: Any, **kwargs: Any) -> int:
        return await async_tool(*args, **kwargs)

    assert not tool_spec(sync_tool).is_async
    assert tool_spec(async_tool).is_async
    assert tool_spec(wrapped).is_async  # the signature comes from the wrapped function
    assert list(params(tool_spec(wrapped))["properties"]) == ["x"]
    assert not tool_spec(functools.partial(sync_tool)).is_async
    assert tool_spec(functools.partial(async_tool)).is_async


# ---------------------------------------------------------------------------- cache


def test_cache_returns_the_same_spec_and_builds_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[object] = []
    real_build = tool_spec_module._build

    def counting_build(func: Any) -> dict[str, Any]:
        built.append(func)
        return real_build(func)

    monkeypatch.setattr(tool_spec_module, "_build", counting_build)

    def f(x: int) -> None: ...

    first = tool_spec(f)
    assert tool_spec(f) is first
    del first
    gc.collect()
    assert tool_spec(f).func is f  # the spec was dropped: a new one, from the cached parts
    assert built == [f]
    g = functools.partial(f)
    assert tool_spec(g) is tool_spec(g)
    assert built == [f, g]


def test_the_cache_does_not_keep_functions_alive() -> None:
    import weakref

    def f(x: int) -> None: ...

    spec = tool_spec(f)
    ref = weakref.ref(f)
    del f, spec
    gc.collect()
    assert ref() is None


def test_unhashable_callables_are_not_cached_but_work() -> None:
    obj = Stateless()
    spec = tool_spec(obj)
    assert spec.name == "stateless"
    assert spec.func is obj
    assert spec.validate({"x": "2"}) == {"x": 2}
    assert tool_spec(obj) is not spec
