"""Model settings given per run or per call, checked and merged into what one call sends.

An Agent's keyword arguments are its defaults (passed to litellm as they are). On top of them,
in this order (a later layer wins, name by name):

1. the node's own per-call settings: ``Agent(model_settings=...)`` (a dict, or a callable
   ``(state, config) -> dict``), or a subclass's `Agent.call_settings(state, config)`;
2. ``config["model_settings"]``: for every Agent of the run;
3. ``config["model_settings_by_node"][node_name]``: for one Agent node of the run;
4. what the runtime itself asks of one call (`Agent.build_request(..., overrides=...)`).

The layers 1-4 are checked: a name litellm does not commonly take is a ValueError listing the
known ones. Provider-specific values go under ``extra_body`` (sent in the request body by
litellm) or ``extra`` (a dict of further litellm keyword arguments, passed unchecked).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenxgraph.core.redaction import remember_settings

#: the settings a run or a call may override: what `litellm.completion` commonly takes
KNOWN_SETTINGS = frozenset(
    {
        # which model
        "model",
        # sampling and length
        "temperature",
        "top_p",
        "top_k",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "n",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "verbosity",
        # tools
        "tool_choice",
        "parallel_tool_calls",
        # reasoning
        "reasoning_effort",
        "thinking",
        # the call itself
        "timeout",
        "user",
        "service_tier",
        "store",
        "metadata",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "modalities",
        "audio",
        "prediction",
        "web_search_options",
        # where it goes, and with which key
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "organization",
        "extra_headers",
        # provider extras
        "extra_body",
        "extra",
    }
)

#: the config keys this module reads
RUN_SETTINGS_KEY = "model_settings"
NODE_SETTINGS_KEY = "model_settings_by_node"


def checked(settings: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """`settings` as a dict, after refusing any name not in `KNOWN_SETTINGS`; `where` says
    where they were given, for the error."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise TypeError(f"{where} must be a dict of model settings, not {type(settings).__name__}")
    unknown = [name for name in settings if name not in KNOWN_SETTINGS]
    if unknown:
        raise ValueError(
            f"{where} has unknown model setting(s) {sorted(map(str, unknown))}; the known ones "
            f"are {sorted(KNOWN_SETTINGS)}. Put provider-specific values under 'extra_body' "
            "(sent in the request body) or 'extra' (further litellm arguments, unchecked)."
        )
    extra = settings.get("extra")
    if extra is not None and not isinstance(extra, Mapping):
        raise TypeError(f"{where}['extra'] must be a dict, not {type(extra).__name__}")
    remember_settings(settings)  # a key given here is redacted from errors and logs too
    return dict(settings)


def run_layers(config: Mapping[str, Any], node: str | None) -> list[dict[str, Any]]:
    """The checked settings of a run's config that apply to the Agent node `node`: the run's
    ``model_settings``, then that node's entry of ``model_settings_by_node``."""
    layers: list[dict[str, Any]] = []
    run = config.get(RUN_SETTINGS_KEY)
    if run:
        layers.append(checked(run, f"config[{RUN_SETTINGS_KEY!r}]"))
    by_node = config.get(NODE_SETTINGS_KEY)
    if by_node:
        if not isinstance(by_node, Mapping):
            raise TypeError(
                f"config[{NODE_SETTINGS_KEY!r}] must be a dict of node name -> model settings, "
                f"not {type(by_node).__name__}"
            )
        mine = by_node.get(node) if node is not None else None
        if mine:
            layers.append(checked(mine, f"config[{NODE_SETTINGS_KEY!r}][{node!r}]"))
    return layers


def merged(defaults: Mapping[str, Any], *layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """What one call sends: `defaults` with each layer on top, name by name (a value of None
    removes the name: ``{"temperature": None}`` sends the provider's default), and every
    ``extra`` dict spread into the top level last."""
    result = dict(defaults)
    extras: dict[str, Any] = {}
    for layer in (defaults, *layers):
        if not layer:
            continue
        for name, value in layer.items():
            if name == "extra":
                extras.update(value or {})
            elif value is None:
                result.pop(name, None)
            else:
                result[name] = value
    result.pop("extra", None)
    result.update(extras)
    return result


__all__ = [
    "KNOWN_SETTINGS",
    "NODE_SETTINGS_KEY",
    "RUN_SETTINGS_KEY",
    "checked",
    "merged",
    "run_layers",
]
