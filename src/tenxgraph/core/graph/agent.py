"""The `Agent` node: builds a model request from the state, calls the model through the
retry/fallback chain, and returns the answer as a `Message` (streamed under `astream`)."""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from tenxgraph.core.exceptions import GraphError, ModelContextWindowError
from tenxgraph.core.llm import calling
from tenxgraph.core.llm.calling import Route
from tenxgraph.core.llm.litellm_client import LiteLLMClient
from tenxgraph.core.llm.models import FallbackModel, resolve, resolve_fallback
from tenxgraph.core.llm.request import ModelClient, ModelRequest
from tenxgraph.core.llm.retry import RetryConfig, retry_config_from
from tenxgraph.core.llm.summary import RECORD, SUMMARY_NOTE
from tenxgraph.core.redaction import get_logger, remember_settings
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.context_manager import BaseContextManager
from tenxgraph.observability.observer import current_observer

if TYPE_CHECKING:
    from tenxgraph.core.state.budget import Budget

logger = get_logger(__name__)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class ToolSource(Protocol):
    """What an Agent needs from its tool node: the OpenAI-format schemas of its tools."""

    def all_tools(self, *args: Any, **kwargs: Any) -> Any: ...


class Agent:
    """A graph node that asks a model for the next assistant message.

    `model` is a litellm model name (``"openai/gpt-4o-mini"``, ``"anthropic/..."``), ``"test"``
    for the offline model, or a `ModelClient` object. Extra keyword arguments (temperature,
    max_tokens, api_base, api_key, timeout, ...) go to the provider as they are.
    Constructing an Agent touches no network and needs no key.

    `fallback_models` are tried in turn when the model keeps failing: names or clients, or
    ``("anthropic/claude-sonnet-4-5", {"api_key": ...})`` / ``{"model": ..., "api_key": ...}``
    for one with settings of its own. A credential (or base URL) goes only to the provider it
    was given for: a fallback on another provider uses its own, or its environment variable.
    Every credential given is redacted from errors and logs.
    """

    def __init__(
        self,
        model: str | ModelClient,
        *,
        system_prompt: str | Iterable[str | Mapping[str, Any]] | None = None,
        tool_node: str | ToolSource | None = None,
        extra_messages: Iterable[Message] | None = None,
        trim_context: bool = False,
        tools_tags: Iterable[str] | None = None,
        output_schema: type[BaseModel] | None = None,
        reasoning_config: Mapping[str, Any] | bool | None = None,
        retry_config: RetryConfig | bool | None = True,
        fallback_models: Iterable[FallbackModel] | None = None,
        output_type: str = "text",
        budget: Budget | dict[str, Any] | None = None,
        **llm_kwargs: Any,
    ) -> None:
        if output_type != "text":
            raise ValueError(
                f"output_type={output_type!r} is not supported: an Agent answers with messages "
                "(text, tool calls, reasoning); use output_schema for structured output"
            )
        if output_schema is not None and not (
            inspect.isclass(output_schema) and issubclass(output_schema, BaseModel)
        ):
            raise TypeError(f"output_schema must be a pydantic model class, not {output_schema!r}")
        if (
            tool_node is not None
            and not isinstance(tool_node, str)
            and not callable(getattr(tool_node, "all_tools", None))
        ):
            raise TypeError(
                "tool_node must be the name of a ToolNode in the graph or an object with "
                f"all_tools(), not {type(tool_node).__name__}"
            )
        self.model = model
        self.system_prompt = _system_prompts(system_prompt)
        self.tool_node = tool_node
        self.extra_messages = list(extra_messages or ())
        self.trim_context = trim_context
        if isinstance(tools_tags, str):  # one tag, not its letters
            tools_tags = [tools_tags]
        self.tools_tags = set(tools_tags) if tools_tags is not None else None
        self.output_schema = output_schema
        self.budget = _budget(budget)  # limits on this Agent's calls
        self.reasoning_config = reasoning_config
        self.retry_config = retry_config_from(retry_config)
        self.fallback_models = list(fallback_models or ())
        self.llm_kwargs = {**llm_kwargs, **_reasoning_settings(reasoning_config)}
        remember_settings(self.llm_kwargs)
        client = LiteLLMClient()
        self._routes: tuple[Route, ...] = (
            resolve(model, client),
            *(resolve_fallback(m, client) for m in self.fallback_models),
        )
        self._tools: ToolSource | None = None if isinstance(tool_node, str) else tool_node
        self._manager: BaseContextManager[AgentState] | None = None  # the graph's, at compile
        self._warned_run: Any = None

    def __repr__(self) -> str:
        return f"Agent(model={self._routes[0].model!r})"

    # -- graph wiring ----------------------------------------------------------------------

    def _bind_to_graph(
        self,
        name: str,
        nodes: Mapping[str, Any],
        context_manager: BaseContextManager[Any] | None = None,
    ) -> Agent:
        """The copy of this Agent that a compiled graph runs: its `tool_node` name resolved to
        that graph's node (GRAPH_005 unknown, GRAPH_006 not a tool node) and the graph's
        context manager at hand. The Agent the user holds is not changed, so it may serve
        several graphs."""
        if not isinstance(self.tool_node, str) and context_manager is None:
            return self
        bound = copy.copy(self)
        bound._manager = context_manager
        if not isinstance(self.tool_node, str):
            return bound
        target = nodes.get(self.tool_node)
        if target is None:
            raise GraphError(
                f"Agent node {name!r} has tool_node={self.tool_node!r}, which is not a node of "
                f"the graph: add it with graph.add_node({self.tool_node!r}, ToolNode([...]))",
                "GRAPH_005",
                {"node": name, "tool_node": self.tool_node},
            )
        if not callable(getattr(target, "all_tools", None)):
            raise GraphError(
                f"Agent node {name!r} has tool_node={self.tool_node!r}, but that node is a "
                f"{type(target).__name__}, not a ToolNode",
                "GRAPH_006",
                {"node": name, "tool_node": self.tool_node},
            )
        bound._tools = target
        return bound

    # -- the node --------------------------------------------------------------------------

    async def __call__(self, state: AgentState, config: dict[str, Any]) -> AsyncIterator[Any]:
        if not config.get("is_stream"):
            yield await self._whole_answer(state, config)
            return
        view = await self._view(state, config) if self.trim_context else state
        final: Message | None = None
        retried = False
        while final is None:
            request = await self.build_request(view)
            try:
                # the first piece (after any retries and fallbacks), then the model's own
                # iterator: nothing between it and us per piece
                first, pieces, call = await calling.open_stream(
                    self._routes, request, self.retry_config
                )
                try:
                    if first is not None:
                        if first.delta:
                            yield first
                        else:
                            final = first
                        async for message in pieces:
                            if message.delta:
                                yield message
                            else:
                                final = message
                except BaseException as error:
                    if call is not None:
                        await call.failed(error)
                        call = None
                    raise
                finally:  # the provider stream, if we stop
                    await calling.close(pieces)
                if call is not None:
                    await call.ended(final)
            except ModelContextWindowError as exc:
                if retried:
                    raise self._still_too_long(exc) from None
                if final is not None:
                    raise
                view, retried = await self._overflow(view, exc), True
                continue  # a context-window refusal comes before any piece
            if final is None:
                raise RuntimeError(f"{self!r}: the model stream ended without a final message")
        update = self._summary_update(state, view)
        if update is not None:
            yield update
        yield self._finish(final)

    async def _whole_answer(self, state: AgentState, config: dict[str, Any]) -> Any:
        """The node's output in one piece, for runs that stream nothing: one non-streamed
        answer, with the new summary if trimming the context made one."""
        view = await self._view(state, config) if self.trim_context else state
        retried = False
        while True:
            try:
                request = await self.build_request(view)
                final = await calling.complete(self._routes, request, self.retry_config)
                break
            except ModelContextWindowError as exc:
                if retried:
                    raise self._still_too_long(exc) from None
                view, retried = await self._overflow(view, exc), True
        message = self._finish(final)
        update = self._summary_update(state, view)
        if update is None:
            return message
        update["context"] = [message]
        return update

    # what the engine awaits instead of iterating `__call__` when nothing is streamed (the
    # same output); None on a subclass with a `__call__` of its own
    _whole_output = _whole_answer

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__call__" in cls.__dict__:  # a node of its own: always run through it
            cls._whole_output = None  # type: ignore[assignment]

    def _summary_update(self, state: AgentState, view: AgentState) -> dict[str, Any] | None:
        """`{"context_summary": ...}` when trimming the context made a new summary."""
        if view is state:
            return None
        made = view.execution_meta.internal_data.get(RECORD)
        if made is state.execution_meta.internal_data.get(RECORD):
            return None
        state.execution_meta.internal_data[RECORD] = made
        return {"context_summary": view.context_summary}

    async def _view(self, state: AgentState, config: dict[str, Any]) -> AgentState:
        """The state whose context the model sees: trimmed by the graph's context manager
        when `trim_context` is on."""
        if not self.trim_context:
            return state
        if self._manager is None:
            run = config.get("run_id")
            if run is None or run != self._warned_run:
                self._warned_run = run
                logger.warning(
                    "%r has trim_context=True but its graph has no context manager, so the "
                    "context is not trimmed: register one with StateGraph(..., "
                    "context_manager=MessageContextManager(max_messages=20)) or "
                    "SummaryContextManager(model)",
                    self,
                )
            return state
        return await self._manager.atrim_context(state)

    async def _overflow(self, view: AgentState, error: ModelContextWindowError) -> AgentState:
        """The context to try once more after the model refused `view` as too long."""
        if self._manager is None:
            raise error
        logger.warning("%r: the context is too long for the model; trimming and retrying", self)
        return await self._manager.atrim_overflow(view)

    def _still_too_long(self, error: ModelContextWindowError) -> ModelContextWindowError:
        error.message += (
            f" (also after trimming it with {self._manager!r}: lower its max_messages or "
            "token_budget, or use a model with a larger context window)"
        )
        return error

    async def build_request(self, state: AgentState) -> ModelRequest:
        """The request this Agent would send for `state`: system prompts with their
        `{field}` placeholders filled, the summary note, the history, the extra messages."""
        prompts = self.system_prompt
        messages = (
            [Message.text_message(_fill(prompt, state), "system") for prompt in prompts]
            if prompts
            else []
        )
        if state.context_summary:
            messages.append(Message.text_message(SUMMARY_NOTE + state.context_summary, "system"))
        messages.extend(state.context)
        if self.extra_messages:
            messages.extend(self.extra_messages)
        tools = await self._tool_schemas() if self._tools is not None else []
        settings = self.llm_kwargs
        observer = current_observer.get()
        if observer is not None and (observer.meter is not None or self.budget is not None):
            gate = observer.metered().model_gate(self.budget)  # may end the run here
            if gate is not None:
                if not gate.tools:  # the last call: for a final answer
                    tools = []
                    messages.append(Message.text_message(gate.note or "", "system"))
                if gate.max_tokens is not None:
                    given = settings.get("max_tokens")
                    cap = gate.max_tokens if given is None else min(given, gate.max_tokens)
                    settings = {**settings, "max_tokens": cap}
        return ModelRequest(
            model=self._routes[0].model,
            messages=messages,
            tools=tools,
            output_schema=self.output_schema,
            settings=settings,
        )

    async def _tool_schemas(self) -> list[dict[str, Any]]:
        source = self._tools
        if source is None:
            return []
        tags = self.tools_tags
        value = source.all_tools() if tags is None else source.all_tools(tags=tags)
        if inspect.isawaitable(value):
            value = await value
        return list(value)

    def _finish(self, message: Message) -> Message:
        schema = self.output_schema
        if schema is not None and message.parsed_content is None and not message.has_tool_calls():
            try:
                message.parsed_content = schema.model_validate_json(message.text())
            except ValidationError as exc:
                message.metadata["parse_error"] = str(exc)
                logger.warning(
                    "%r: the answer does not match output_schema %s: %s", self, schema.__name__, exc
                )
        return message


def _system_prompts(value: str | Iterable[str | Mapping[str, Any]] | None) -> list[str]:
    """System prompts as strings: a str, or a list of strs or ``{"role": "system",
    "content": ...}`` dicts (the 10xgraph shape)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    prompts: list[str] = []
    for item in value:
        if isinstance(item, str):
            prompts.append(item)
        elif isinstance(item, Mapping) and isinstance(item.get("content"), str):
            prompts.append(item["content"])
        else:
            raise TypeError(
                "system_prompt items must be strings or {'role': 'system', 'content': str} "
                f"dicts, got {item!r}"
            )
    return prompts


def _fill(prompt: str, state: AgentState) -> str:
    """`{field}` placeholders naming a state field are replaced by its value; any other braces
    (JSON examples, say) are left alone."""
    if "{" not in prompt:
        return prompt
    fields = type(state).model_fields

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in fields and name != "context":
            return str(getattr(state, name))
        return match.group(0)

    return _PLACEHOLDER.sub(value, prompt)


def _reasoning_settings(config: Mapping[str, Any] | bool | None) -> dict[str, Any]:
    """Provider settings for `reasoning_config`: ``{"effort": "low"|"medium"|"high"}`` or
    ``{"budget_tokens": N}``; None/False sends nothing (models without reasoning reject it)."""
    if config is None or config is False:
        return {}
    if config is True:
        return {"reasoning_effort": "medium"}
    if not isinstance(config, Mapping):
        raise TypeError(f"reasoning_config must be a dict, True, False or None, not {config!r}")
    unknown = set(config) - {"effort", "budget_tokens"}
    if unknown:
        raise ValueError(
            f"reasoning_config keys {sorted(unknown)} are not understood; use 'effort' "
            "('low'|'medium'|'high') or 'budget_tokens'"
        )
    settings: dict[str, Any] = {}
    if "effort" in config:
        settings["reasoning_effort"] = config["effort"]
    if "budget_tokens" in config:
        settings["thinking"] = {"type": "enabled", "budget_tokens": int(config["budget_tokens"])}
    return settings


def _budget(value: Any) -> Budget | None:
    """`Agent(budget=...)` as a `Budget` (its module imported only when one is given)."""
    if value is None:
        return None
    from tenxgraph.core.state.budget import Budget

    return Budget.of(value, "Agent(budget=...)")


__all__ = ["Agent", "ToolSource"]
