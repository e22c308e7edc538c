"""The `Agent` node: builds a model request from the state, calls the model through the
retry/fallback chain, and returns the answer as a `Message` (streamed under `astream`)."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from tenxgraph.core.exceptions import GraphError, ModelContextWindowError, OutputValidationError
from tenxgraph.core.graph.media import check_multimodal_config, with_media_resolved
from tenxgraph.core.llm import calling, structured
from tenxgraph.core.llm import settings as model_settings_
from tenxgraph.core.llm.calling import Route, is_connection_setting
from tenxgraph.core.llm.litellm_client import LiteLLMClient
from tenxgraph.core.llm.models import FallbackModel, resolve, resolve_fallback
from tenxgraph.core.llm.request import ModelClient, ModelRequest
from tenxgraph.core.llm.retry import RetryConfig, retry_config_from
from tenxgraph.core.llm.summary import RECORD, SUMMARY_NOTE
from tenxgraph.core.redaction import get_logger, remember_settings
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.context_manager import BaseContextManager
from tenxgraph.core.state.message_block import TextBlock
from tenxgraph.observability.observer import current_observer

if TYPE_CHECKING:
    from tenxgraph.core.graph.provider_files import FileIds
    from tenxgraph.core.state.budget import Budget
    from tenxgraph.storage.media.config import MultimodalConfig

logger = get_logger(__name__)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


# what `Agent(model_settings=...)` takes for per-call settings: (state, config) -> settings
SettingsFunction = Callable[
    [Any, dict[str, Any]], Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None
]


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

    Structured output: ``output_schema=Model`` (or ``output_type=Model``) makes the final
    answer's `parsed_content` a `Model`. `output_mode` says how it is asked for ("auto":
    per model from litellm's capability data; "native", "tool", "text": see
    `tenxgraph.core.llm.structured`). An answer that does not validate is shown back to the
    model with pydantic's errors, up to `output_retries` times, then `OutputValidationError`
    is raised. The node returns only the valid answer: the failed attempts and the
    corrections are sent to the model but never stored.

    Model settings per run or per call: `model_settings` is a dict of defaults or a function
    ``(state, config) -> dict`` called for each call (a subclass may override
    `call_settings` instead); a run overrides them with ``config["model_settings"]`` (every
    Agent) and ``config["model_settings_by_node"][node]``. See `tenxgraph.core.llm.settings`.
    """

    def __init__(
        self,
        model: str | ModelClient,
        *,
        system_prompt: str | Iterable[str | Mapping[str, Any] | TextBlock] | None = None,
        tool_node: str | ToolSource | None = None,
        extra_messages: Iterable[Message] | None = None,
        trim_context: bool = False,
        tools_tags: Iterable[str] | None = None,
        output_schema: type[BaseModel] | None = None,
        reasoning_config: Mapping[str, Any] | bool | None = None,
        retry_config: RetryConfig | bool | None = True,
        fallback_models: Iterable[FallbackModel] | None = None,
        output_type: str | type[BaseModel] = "text",
        output_mode: str = "auto",
        output_retries: int = 1,
        model_settings: Mapping[str, Any] | SettingsFunction | None = None,
        budget: Budget | dict[str, Any] | None = None,
        multimodal_config: MultimodalConfig | None = None,
        **llm_kwargs: Any,
    ) -> None:
        output_schema = _output_schema(output_type, output_schema)
        _check_output_options(output_mode, output_retries)
        defaults = _default_settings(model_settings)
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
        self._system_blocks = _system_blocks(system_prompt)
        self.system_prompt = [_joined(blocks) for blocks in self._system_blocks]
        self.tool_node = tool_node
        self.extra_messages = list(extra_messages or ())
        self.trim_context = trim_context
        if isinstance(tools_tags, str):  # one tag, not its letters
            tools_tags = [tools_tags]
        self.tools_tags = set(tools_tags) if tools_tags is not None else None
        self.output_schema = output_schema
        self.output_mode = output_mode
        self.output_retries = output_retries
        self.model_settings = model_settings
        self.budget = _budget(budget)  # limits on this Agent's calls
        # how media reaches the model: inline, by URL or by provider file id (`core.graph.media`)
        self.multimodal_config = check_multimodal_config(multimodal_config)
        self.reasoning_config = reasoning_config
        self.retry_config = retry_config_from(retry_config)
        self.fallback_models = list(fallback_models or ())
        self.llm_kwargs = model_settings_.merged(
            {}, llm_kwargs, _reasoning_settings(reasoning_config), defaults
        )
        remember_settings(self.llm_kwargs)
        client = LiteLLMClient()
        self._routes: tuple[Route, ...] = (
            resolve(model, client),
            *(resolve_fallback(m, client) for m in self.fallback_models),
        )
        self._tools: ToolSource | None = None if isinstance(tool_node, str) else tool_node
        self._manager: BaseContextManager[AgentState] | None = None  # the graph's, at compile
        self._warned_run: Any = None
        self._node: str | None = None  # its name in the graph, at compile
        self._other_routes: dict[str, tuple[Route, ...]] = {}  # per model a run asks for

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
        bound = copy.copy(self)
        bound._manager = context_manager
        bound._node = name  # for config["model_settings_by_node"]
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
        schema = self.output_schema
        retried = False
        repairs: list[Message] = []  # failed answers and their corrections, never stored
        while True:
            final: Message | None = None
            request = await self.call_request(view, config)
            if repairs:
                request.messages.extend(repairs)
            # in tool mode, the output tool's pieces become the answer's text deltas
            translate = structured.OutputStream(schema).translate if schema else None
            try:
                # the first piece (after any retries and fallbacks), then the model's own
                # iterator: nothing between it and us per piece
                first, pieces, call = await calling.open_stream(
                    self._routes_for(request), request, self.retry_config
                )
                try:
                    if first is not None:
                        if not first.delta:
                            final = first
                        elif translate is None:
                            yield first
                        elif (shown := translate(first)) is not None:
                            yield shown
                        async for message in pieces:
                            if not message.delta:
                                final = message
                            elif translate is None:
                                yield message
                            elif (shown := translate(message)) is not None:
                                yield shown
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
            answer = self._checked(final, repairs)
            if answer is not None:
                break
        update = self._summary_update(state, view)
        if update is not None:
            yield update
        yield answer

    async def _whole_answer(self, state: AgentState, config: dict[str, Any]) -> Any:
        """The node's output in one piece, for runs that stream nothing: one non-streamed
        answer, with the new summary if trimming the context made one."""
        view = await self._view(state, config) if self.trim_context else state
        retried = False
        repairs: list[Message] = []  # failed answers and their corrections, never stored
        while True:
            try:
                request = await self.call_request(view, config)
                if repairs:
                    request.messages.extend(repairs)
                final = await calling.complete(
                    self._routes_for(request), request, self.retry_config
                )
            except ModelContextWindowError as exc:
                if retried:
                    raise self._still_too_long(exc) from None
                view, retried = await self._overflow(view, exc), True
                continue
            message = self._checked(final, repairs)
            if message is not None:
                break
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
        """The request this Agent would send for `state` with its own settings: system
        prompts with their `{field}` placeholders filled, the summary note, the history, the
        extra messages. (A subclass may override it; `call_request` adds a run's settings.)"""
        messages = self._system_messages(state)
        if state.context_summary:
            messages.append(Message.text_message(SUMMARY_NOTE + state.context_summary, "system"))
        messages.extend(state.context)
        if self.extra_messages:
            messages.extend(self.extra_messages)
        tools = await self._tool_schemas() if self._tools is not None else []
        schema = self.output_schema
        if schema is not None and tools:
            name = structured.output_tool_name(schema)
            if any((t.get("function") or {}).get("name") == name for t in tools):
                raise ValueError(
                    f"{self!r} has a tool named {name!r}, the name of its output_schema's "
                    "output tool: rename the tool or the schema class"
                )
        return ModelRequest(
            model=self._routes[0].model,
            messages=messages,
            tools=tools,
            output_schema=schema,
            settings=self.llm_kwargs,
            output_mode=self.output_mode,
        )

    async def call_request(
        self,
        state: AgentState,
        config: Mapping[str, Any] | None = None,
        *,
        overrides: Mapping[str, Any] | None = None,
        tools: bool = True,
    ) -> ModelRequest:
        """The request one call sends: `build_request`'s, with its settings overridden by
        the node's per-call settings (`call_settings`), then the run's
        (``config["model_settings"]``, ``config["model_settings_by_node"][node]``), then
        `overrides` (what the runtime asks of this one call); without its tools when `tools`
        is False. Unknown setting names are a ValueError. A ``"model"`` setting changes the
        model asked (its fallbacks stay); on another provider the Agent's own key and base
        URL are not sent to it."""
        request = await with_media_resolved(
            await self.build_request(state),
            self.multimodal_config,
            self._provider_of,
            self._file_ids,
        )
        config = config or {}
        layers: list[dict[str, Any]] = []
        own = self.call_settings(state, config if isinstance(config, dict) else dict(config))
        if inspect.isawaitable(own):
            own = await own
        if own:
            layers.append(model_settings_.checked(own, f"{self!r}'s per-call model settings"))
        layers.extend(model_settings_.run_layers(config, self._node))
        if overrides:
            layers.append(model_settings_.checked(overrides, "the call's overrides"))
        if not tools:
            request.tools = []
        if layers:
            request = self._with_layers(request, layers)
        return self._within_budget(request)

    def _with_layers(self, request: ModelRequest, layers: list[dict[str, Any]]) -> ModelRequest:
        """`request` with the setting `layers` over its own, the last one winning."""
        defaults: Mapping[str, Any] = request.settings
        model = next((layer["model"] for layer in reversed(layers) if "model" in layer), None)
        if (
            model is not None
            and model != request.model
            and not self._same_provider(request.model, model)
        ):
            defaults = {k: v for k, v in defaults.items() if not is_connection_setting(k)}
        settings = model_settings_.merged(defaults, *layers)
        settings.pop("model", None)
        return dataclasses.replace(request, model=model or request.model, settings=settings)

    def _within_budget(self, request: ModelRequest) -> ModelRequest:
        """`request` as the run's budget (and this Agent's) lets it go: unchanged, without
        tools and asking for a final answer (the last call), with `max_tokens` capped at the
        output tokens left; or the run ends here (`BudgetSpent`, `BudgetExceededError`)."""
        observer = current_observer.get()
        if observer is None or (observer.meter is None and self.budget is None):
            return request
        gate = observer.metered().model_gate(self.budget)
        if gate is None:
            return request
        settings = request.settings
        if gate.max_tokens is not None:
            given = settings.get("max_tokens")
            cap = gate.max_tokens if given is None else min(given, gate.max_tokens)
            settings = {**settings, "max_tokens": cap}
        if gate.tools:
            return (
                request
                if settings is request.settings
                else (dataclasses.replace(request, settings=settings))
            )
        note = Message.text_message(gate.note or "", "system")
        return dataclasses.replace(
            request, tools=[], messages=[*request.messages, note], settings=settings
        )

    def call_settings(
        self, state: AgentState, config: dict[str, Any]
    ) -> Mapping[str, Any] | Awaitable[Mapping[str, Any] | None] | None:
        """This node's settings for one call (checked like a run's): by default those of
        `model_settings` when it is a function. A subclass may override it."""
        function = self.model_settings
        if function is None or isinstance(function, Mapping):
            return None
        return function(state, config)

    def _file_ids(self) -> FileIds:
        """Where this Agent remembers provider file ids when its graph has no media store."""
        memory = self.__dict__.get("_file_id_memory")
        if memory is None:
            from tenxgraph.storage.media.base import ProviderFileMemory

            memory = self.__dict__["_file_id_memory"] = ProviderFileMemory()
        return memory

    def _provider_of(self, model: str) -> str | None:
        """The provider `model` goes to through this Agent's client, when it can tell."""
        provider = getattr(self._routes[0].client, "provider", None)
        if not callable(provider):
            return None
        try:
            return str(provider(model))
        except GraphError:
            return None

    def _same_provider(self, a: str, b: str) -> bool:
        provider = getattr(self._routes[0].client, "provider", None)
        if not callable(provider):
            return True
        try:
            return bool(provider(a) == provider(b))
        except GraphError:  # a name its client cannot route: share nothing
            return False

    def _routes_for(self, request: ModelRequest) -> tuple[Route, ...]:
        """The models to try for `request`: the Agent's, or the model a run's settings asked
        for followed by the Agent's fallbacks."""
        routes = self._routes
        if request.model == routes[0].model:
            return routes
        found = self._other_routes.get(request.model)
        if found is None:
            client = routes[0].client
            litellm = client if isinstance(client, LiteLLMClient) else LiteLLMClient()
            found = (resolve(request.model, litellm), *routes[1:])
            if len(self._other_routes) < 64:
                self._other_routes[request.model] = found
        return found

    def _system_messages(self, state: AgentState) -> list[Message]:
        blocks = self._system_blocks
        if [_joined(b) for b in blocks] != self.system_prompt:  # changed since: as strings
            blocks = [[TextBlock(text=p)] for p in self.system_prompt]
        messages = []
        for prompt in blocks:
            if len(prompt) == 1 and prompt[0].cache_control is None:
                messages.append(Message.text_message(_fill(prompt[0].text, state), "system"))
            else:
                content = [
                    TextBlock(text=_fill(b.text, state), cache_control=b.cache_control)
                    for b in prompt
                ]
                messages.append(Message(role="system", content=content))
        return messages

    async def _tool_schemas(self) -> list[dict[str, Any]]:
        source = self._tools
        if source is None:
            return []
        tags = self.tools_tags
        value = source.all_tools() if tags is None else source.all_tools(tags=tags)
        if inspect.isawaitable(value):
            value = await value
        return list(value)

    def _checked(self, final: Message, repairs: list[Message]) -> Message | None:
        """The answer to return, or None after adding to `repairs` what the model is shown
        to correct an answer that does not match `output_schema` (OutputValidationError
        once `output_retries` corrections were asked for). An answer that calls the Agent's
        own tools is returned as it is (without any output tool call): the tool loop goes
        on and the schema applies to the answer after it."""
        schema = self.output_schema
        if schema is None:
            return final
        called = structured.output_call(final, schema)
        if called is None and (final.parsed_content is not None or final.has_tool_calls()):
            return final  # parsed by the client itself (offline models), or a tool round
        if called is not None and len(final.tool_call_blocks()) > 1:
            return structured.without_output_call(final, schema)
        try:
            parsed = structured.parse(final, schema)
        except ValidationError as exc:
            attempts = len(repairs) // 2 + 1
            if attempts > self.output_retries:
                raise self._invalid(final, exc, attempts) from None
            logger.info(
                "%r: the answer does not match output_schema %s; asking again (%d of %d)",
                self, schema.__name__, attempts, self.output_retries,
            )  # fmt: skip
            repairs.extend(structured.feedback(final, schema, structured.error_text(exc)))
            return None
        answer = structured.final_answer(final, schema, parsed)
        if repairs:
            answer.metadata["output_retries"] = len(repairs) // 2
        return answer

    def _invalid(
        self, final: Message, error: ValidationError, attempts: int
    ) -> OutputValidationError:
        schema = self.output_schema
        name = schema.__name__ if schema is not None else "?"
        raw = structured.raw_answer(final, schema) if schema is not None else final.text()
        return OutputValidationError(
            f"{self!r}: the model's answer does not match output_schema {name} after "
            f"{attempts} attempt{'s' if attempts > 1 else ''} (output_retries="
            f"{self.output_retries}): {structured.error_text(error)}. Raise output_retries, "
            "simplify the schema, or try another output_mode or model.",
            context={
                "schema": name,
                "attempts": attempts,
                "model": final.metadata.get("model"),
                "raw_text": raw,
                "errors": structured.error_list(error),
            },
        )


def _output_schema(
    output_type: str | type[BaseModel], output_schema: type[BaseModel] | None
) -> type[BaseModel] | None:
    """The output schema `output_type` and `output_schema` give together."""
    if inspect.isclass(output_type) and issubclass(output_type, BaseModel):
        if output_schema is not None and output_schema is not output_type:
            raise ValueError(
                f"output_type={output_type.__name__} and output_schema="
                f"{getattr(output_schema, '__name__', output_schema)} differ: give one"
            )
        return output_type
    if output_type != "text":
        raise ValueError(
            f"output_type={output_type!r} is not supported: an Agent answers with messages "
            "(text, tool calls, reasoning), or with a pydantic model class for structured "
            "output"
        )
    return output_schema


def _check_output_options(output_mode: str, output_retries: int) -> None:
    if output_mode not in structured.OUTPUT_MODES:
        raise ValueError(
            f"output_mode={output_mode!r} is not one of {list(structured.OUTPUT_MODES)}"
        )
    if not isinstance(output_retries, int) or output_retries < 0:
        raise ValueError(f"output_retries must be an int >= 0, not {output_retries!r}")


def _default_settings(given: Mapping[str, Any] | SettingsFunction | None) -> dict[str, Any]:
    """The settings of `Agent(model_settings=...)` when it is a dict (checked)."""
    if isinstance(given, Mapping):
        return model_settings_.checked(given, "model_settings")
    if given is not None and not callable(given):
        raise TypeError(
            "model_settings must be a dict or a function (state, config) -> dict, not "
            f"{type(given).__name__}"
        )
    return {}


def _system_blocks(
    value: str | Iterable[str | Mapping[str, Any] | TextBlock] | None,
) -> list[list[TextBlock]]:
    """System prompts as lists of text blocks: a str, or a list of strs, `TextBlock`s, or
    ``{"role": "system", "content": str | [text parts]}`` dicts (the 10xgraph shape), where
    a dict or a text part may carry a ``cache_control`` (a prompt-cache breakpoint, e.g.
    ``{"type": "ephemeral"}`` for Anthropic)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [[TextBlock(text=value)]]
    prompts: list[list[TextBlock]] = []
    for item in value:
        if isinstance(item, str):
            prompts.append([TextBlock(text=item)])
        elif isinstance(item, TextBlock):
            prompts.append([item])
        elif isinstance(item, Mapping) and isinstance(item.get("content"), str):
            prompts.append(
                [TextBlock(text=item["content"], cache_control=item.get("cache_control"))]
            )
        elif isinstance(item, Mapping) and isinstance(item.get("content"), list):
            try:
                prompts.append([TextBlock.model_validate(part) for part in item["content"]])
            except ValidationError as exc:
                raise TypeError(
                    f"system_prompt content parts must be text parts, got {item!r}: {exc}"
                ) from None
        else:
            raise TypeError(
                "system_prompt items must be strings or {'role': 'system', 'content': str} "
                f"dicts, got {item!r}"
            )
    return prompts


def _joined(blocks: list[TextBlock]) -> str:
    return "".join(b.text for b in blocks)


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


__all__ = ["Agent", "SettingsFunction", "ToolSource"]
