"""The litellm adapter: one `ModelClient` for every provider litellm routes by model name."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, NoReturn

from tenxgraph.core import redaction
from tenxgraph.core.exceptions import (
    ModelAuthError,
    ModelContextWindowError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelUnavailableError,
)
from tenxgraph.core.llm import structured
from tenxgraph.core.llm.request import ModelRequest
from tenxgraph.core.llm.retry import retry_after_seconds
from tenxgraph.core.llm.wire_in import StreamAssembler, message_from_response
from tenxgraph.core.llm.wire_out import to_wire
from tenxgraph.core.state import Message
from tenxgraph.utils.litellm_import import load_litellm


class LiteLLMClient:
    """Calls `litellm.acompletion` and converts its answers. Stateless apart from caches, so
    one instance may serve any number of Agents and event loops."""

    free = False  # its calls are priced from litellm's table

    def __init__(self) -> None:
        self._providers: dict[str, str] = {}
        self._keys_checked: set[str] = set()
        self._capabilities: dict[str, tuple[bool, bool]] = {}

    def output_mode(self, request: ModelRequest, provider: str | None = None) -> str:
        """How `request`'s output schema is asked for when its mode is "auto", from litellm's
        capability data for its model: "native" (a JSON-schema response format) when the
        model supports it, else "tool" (a forced tool call) when it calls functions, else
        "text". Two exceptions: Anthropic gets "tool" (its native mode is a beta, and the
        forced tool call is its documented way) unless extended thinking is on (which
        refuses a forced tool choice); Gemini gets "tool" when the Agent has tools (it
        refuses a JSON response format together with function calling)."""
        if request.output_mode != "auto":
            return request.output_mode
        model = request.model
        if provider is None:
            provider = self.provider(model, request.settings.get("api_base"))
        found = self._capabilities.get(model)
        if found is None:
            litellm = load_litellm()
            try:
                found = (
                    bool(litellm.supports_response_schema(model=model)),
                    bool(litellm.supports_function_calling(model=model)),
                )
            except Exception:  # a model litellm has no data for
                found = (False, False)
            self._capabilities[model] = found
        native, tools = found
        settings = request.settings
        thinking = bool(settings.get("thinking") or settings.get("reasoning_effort"))
        if provider == "anthropic" and tools and not thinking:
            return "tool"
        if provider == "gemini" and request.tools and tools:
            return "tool"
        if native:
            return "native"
        return "tool" if tools and not (provider == "anthropic" and thinking) else "text"

    def provider(self, model: str, api_base: str | None = None) -> str:
        """The provider litellm routes `model` to (``openai``, ``anthropic``, ``gemini``...)."""
        found = self._providers.get(model)
        if found is None:
            litellm = load_litellm()
            try:
                found = litellm.get_llm_provider(model, api_base=api_base)[1]
            except Exception as exc:
                raise ModelRequestError(
                    f"litellm cannot tell which provider serves model {model!r}: prefix the name "
                    "with its provider, e.g. 'openai/gpt-4o-mini', 'anthropic/claude-sonnet-4-5' "
                    "or 'gemini/gemini-2.5-flash' (or use 'test' for the offline model)",
                    context={"model": model},
                ) from exc
            self._providers[model] = found
        return found

    def _check_key(self, model: str, provider: str, settings: dict[str, Any]) -> dict[str, Any]:
        """Fail before sending anything when no key is set: litellm would report a missing key
        as a server error (which looks retryable) for some providers."""
        if model in self._keys_checked or _has_credentials(settings):
            return settings
        report = load_litellm().validate_environment(model)
        missing = report.get("missing_keys") or []
        if report.get("keys_in_environment") or not missing:
            self._keys_checked.add(model)
            return settings
        if settings.get("api_base"):
            # OpenAI-compatible local servers (vLLM, Ollama...) need no key, but the SDK does
            return {**settings, "api_key": "no-key-needed"}
        names = " or ".join(missing)
        raise ModelAuthError(
            f"No API key for {provider} (model {model!r}): set {names} in the environment, or "
            "pass api_key=... to the Agent",
            context={
                "provider": provider,
                "model": model,
                "status_code": None,
                "missing_keys": missing,
            },
        )

    def _prepare(self, request: ModelRequest, stream: bool) -> tuple[str, dict[str, Any]]:
        """The provider serving the request, and the arguments for `litellm.acompletion`."""
        model = request.model
        settings = request.settings
        provider = self._providers.get(model)
        if provider is None:
            provider = self.provider(model, settings.get("api_base"))
        if not (settings.get("api_key") or model in self._keys_checked):
            settings = self._check_key(model, provider, settings)
        kwargs: dict[str, Any] = {
            **settings,
            "model": model,
            "messages": to_wire(request.messages, provider, model),
            "num_retries": 0,
        }
        if request.tools:
            kwargs["tools"] = request.tools
        schema = request.output_schema
        if schema is not None:
            mode = self.output_mode(request, provider)
            if mode == "native":
                kwargs["response_format"] = schema
            elif mode == "tool":
                kwargs["tools"] = [*request.tools, structured.output_tool(schema)]
                kwargs["tool_choice"] = structured.forced_tool_choice(schema, bool(request.tools))
            elif mode == "text":
                kwargs["messages"] = _with_instructions(
                    kwargs["messages"], structured.text_instructions(schema)
                )
            else:
                raise ValueError(f"output_mode must be one of {structured.OUTPUT_MODES}")
        if stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return provider, kwargs

    async def acomplete(self, request: ModelRequest) -> Message:
        provider, kwargs = self._prepare(request, stream=False)
        try:
            response = await load_litellm().acompletion(**kwargs)
        except Exception as exc:
            _reraise(exc, provider, request.model, request.settings)
        if not getattr(response, "choices", None):
            raise no_choice_error(provider, request.model, streamed=False)
        # litellm keeps the price in a private attribute; read without pydantic's __getattr__
        private = getattr(response, "__pydantic_private__", None)
        hidden = private.get("_hidden_params") if private else None
        cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
        return message_from_response(response, provider, request.model, cost)

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        provider, kwargs = self._prepare(request, stream=True)
        assembler = StreamAssembler(provider, request.model)
        try:
            stream = await load_litellm().acompletion(**kwargs)
        except Exception as exc:
            _reraise(exc, provider, request.model, request.settings)
        try:
            add = assembler.add
            async for chunk in stream:
                delta = add(chunk)
                if delta is not None:
                    yield delta
        except Exception as exc:
            if not assembler.answered and _stream_cut(exc):
                redaction.scrub_exception(exc)
                raise no_choice_error(provider, request.model, streamed=True) from exc
            _reraise(exc, provider, request.model, request.settings)
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        if not assembler.answered:
            raise no_choice_error(provider, request.model, streamed=True)
        yield assembler.finish()


def _with_instructions(wire: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The wire messages with a system message holding `text` after the leading system
    messages (the cached prefix of the prompt stays as it was)."""
    at = 0
    while at < len(wire) and wire[at].get("role") == "system":
        at += 1
    return [*wire[:at], {"role": "system", "content": text}, *wire[at:]]


# settings other than `api_key` that authenticate a call (AWS, Azure AD, Vertex AI)
_CREDENTIAL_SETTINGS = (
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_profile_name",
    "aws_role_name",
    "aws_web_identity_token",
    "azure_ad_token",
    "azure_ad_token_provider",
    "vertex_credentials",
    "client_secret",
)


def _has_credentials(settings: dict[str, Any]) -> bool:
    return bool(settings.get("api_key")) or any(settings.get(n) for n in _CREDENTIAL_SETTINGS)


def _stream_cut(exc: Exception) -> bool:
    """Whether litellm ended a stream because it closed without a finish reason (not because
    the provider refused it: a 429 at the start of a stream comes the same way)."""
    try:
        from litellm.exceptions import APIConnectionError, MidStreamFallbackError
    except ImportError:  # an older litellm: the error is reported as it came
        return False
    cause = getattr(exc, "original_exception", None)
    return isinstance(exc, MidStreamFallbackError) and isinstance(cause, APIConnectionError)


def no_choice_error(provider: str, model: str, *, streamed: bool) -> ModelUnavailableError:
    """The error for an answer without any choice (`choices: []`): there is no message to
    keep, so nothing is stored; it may be retried and fall back like a 5xx."""
    where = f"{provider} model {model!r}"
    if streamed:
        what = (
            "ended its stream without an answer (no text, tool call, or finish reason with "
            "usage came: an empty or unreadable body, `choices: []`, or a connection closed "
            "early)"
        )
    else:
        what = "answered without any choice (`choices: []`): there is no message"
    return ModelUnavailableError(
        f"{where} {what}. Nothing was stored. Try again or set fallback_models; if it keeps "
        "happening, check the provider's status and its content filters.",
        "MODEL_UNAVAILABLE_002",
        {"provider": provider, "model": model, "status_code": None, "streamed": streamed},
    )


def _reraise(exc: Exception, provider: str, model: str, settings: dict[str, Any]) -> NoReturn:
    error = model_error(exc, provider, model, settings)
    redaction.scrub_exception(exc)  # the cause a traceback prints shows no key either
    if error is exc:
        raise exc
    raise error from exc


# keys the process was not given but a provider or proxy may echo: well-known key shapes
_KEY_PATTERNS = re.compile(
    r"(key=|sk-|bearer\s+)[A-Za-z0-9_\-\.]{6,}|(AIza|gsk_|AKIA|ASIA)[A-Za-z0-9_\-]{12,}",
    re.IGNORECASE,
)
# Gemini sends no Retry-After header on a 429: the wait is a google.rpc.RetryInfo in the body
_RETRY_DELAY = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')


def _masked_prefix(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(2)) + "***"


def redact_detail(text: str, settings: dict[str, Any]) -> str:
    """A provider's error text without the credentials given to this call or known to the
    process, nor anything shaped like a key."""
    redaction.remember_settings(settings)
    return _KEY_PATTERNS.sub(_masked_prefix, redaction.redact(text))


def model_error(
    exc: BaseException, provider: str, model: str, settings: dict[str, Any]
) -> BaseException:
    """Our exception for a litellm one; anything that is not a provider error is returned
    unchanged so real bugs keep their own type."""
    litellm = load_litellm()
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    detail = redact_detail(str(getattr(exc, "message", None) or exc), settings)
    context: dict[str, Any] = {
        "provider": provider,
        "model": model,
        "status_code": status,
        "detail": detail,
    }
    where = f"{provider} model {model!r}"
    if isinstance(exc, litellm.ContextWindowExceededError):
        return ModelContextWindowError(
            f"The request is longer than the context window of {where}: trim the "
            "conversation (a context manager with trim_context=True) or use a model with a "
            f"larger window. Provider said: {detail}",
            context=context,
        )
    refused = status in (401, 403)  # litellm reports some providers' 403 as a bare APIError
    if refused or isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return ModelAuthError(
            f"{where} rejected the credentials (HTTP {status}): check the API key for "
            f"{provider} (its environment variable or api_key=...) and that it may use this "
            f"model. Provider said: {detail}",
            context=context,
        )
    if isinstance(exc, litellm.RateLimitError) or status == 429:
        headers = getattr(exc, "litellm_response_headers", None)
        if not headers:
            response = getattr(exc, "response", None)
            headers = getattr(response, "headers", None)
        retry_after = retry_after_seconds(headers)
        if retry_after is None and (delay := _RETRY_DELAY.search(detail)) is not None:
            retry_after = float(delay.group(1))
        context["retry_after"] = retry_after
        return ModelRateLimitError(
            f"{where} is rate limiting us (HTTP 429): slow down, raise your quota, or set "
            f"fallback_models. Provider said: {detail}",
            context=context,
        )
    if isinstance(exc, litellm.Timeout):
        context["status_code"] = None
        return ModelUnavailableError(
            f"{where} did not answer in time: raise timeout=... on the Agent or try again. "
            f"{detail}",
            context=context,
        )
    if isinstance(
        exc,
        litellm.APIConnectionError
        | litellm.InternalServerError
        | litellm.ServiceUnavailableError
        | litellm.BadGatewayError,
    ) or (status is not None and status >= 500):
        return ModelUnavailableError(
            f"{where} failed or could not be reached"
            + (f" (HTTP {status})" if status else "")
            + f": try again later or set fallback_models. Provider said: {detail}",
            context=context,
        )
    if isinstance(
        exc, litellm.BadRequestError | litellm.NotFoundError | litellm.UnprocessableEntityError
    ):
        return ModelRequestError(
            f"{where} rejected the request as invalid (HTTP {status}): check the model name "
            f"and the parameters passed to the Agent. Provider said: {detail}",
            context=context,
        )
    if isinstance(exc, litellm.APIError) or type(exc).__module__.startswith(("litellm", "openai")):
        return ModelError(f"{where} failed: {detail}", context=context)
    return exc


__all__ = ["LiteLLMClient", "load_litellm", "model_error"]
