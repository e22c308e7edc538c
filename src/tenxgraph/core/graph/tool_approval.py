"""Tool calls a person approves, edits or rejects before they run.

A `ToolNode` pauses the run (an `interrupt()` of its own, so the pause is durable like any
other) with the calls that need approval; whoever resumes the thread, in this process or
another, answers with one decision per call:

    {"resume": {"call_1": "approve",
                "call_2": {"edit": {"amount": 20}},
                "call_3": {"reject": "Refunds above 50 EUR need a manager"}}}

A single pending call also takes a bare decision: ``{"resume": "approve"}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from tenxgraph.core.graph.tool_calls import ToolCall
from tenxgraph.core.graph.tool_output import tool_output
from tenxgraph.core.graph.tool_spec import ToolSpec
from tenxgraph.core.graph.tool_updates import brief
from tenxgraph.utils.interrupt import interrupt

APPROVAL_REASON = "tool_approval"  # the `reason` of the interrupt a ToolNode pauses with
_FORMS = '"approve", "reject", {"edit": {<all arguments>}} or {"reject": "<reason>"}'


@dataclass(frozen=True, slots=True)
class Decision:
    """What a person decided about one call: run it as asked, run it with `args` instead, or
    answer the model with an error carrying `reason`."""

    kind: Literal["approve", "edit", "reject"]
    args: dict[str, Any] | None = None
    reason: str | None = None


def ask(calls: Sequence[ToolCall], tools: Mapping[str, ToolSpec]) -> dict[str, Decision]:
    """The decisions on `calls`, from the answers given to this node's interrupts so far.

    Pauses the run (raises `GraphInterrupt`) while there is no answer; an answer that cannot
    be used is not the end of the run: it pauses again, saying what was wrong."""
    error: str | None = None
    while True:
        value: dict[str, Any] = {"tool_calls": [_listed(c) for c in calls]}
        if error is not None:
            value["error"] = error
        names = ", ".join(f"{c.name} ({c.id})" for c in calls)
        answer = interrupt(
            value,
            message=f"Approve, edit or reject the tool call(s): {names}",
            reason=APPROVAL_REASON,
        )
        try:
            return read_decisions(answer, calls, tools)
        except ValueError as exc:
            error = str(exc)


def read_decisions(
    answer: Any, calls: Sequence[ToolCall], tools: Mapping[str, ToolSpec]
) -> dict[str, Decision]:
    """One decision per call, from a resume answer; ValueError saying what is wrong (and the
    forms a decision takes) when some call has none, or an unusable one."""
    by_id = {c.id: c for c in calls}
    if len(calls) == 1 and _is_one_decision(answer, by_id):
        answer = {calls[0].id: answer}
    pending = ", ".join(f"{c.id!r} ({c.name})" for c in calls)
    if not isinstance(answer, Mapping):
        raise ValueError(
            f"The answer to a tool approval is a dict of one decision per call id, like "
            f"{{{calls[0].id!r}: 'approve'}}; got {_shown(answer)}. Pending calls: {pending}. "
            f"A decision is {_FORMS}"
        )
    unknown = [key for key in answer if key not in by_id]
    missing = [call_id for call_id in by_id if call_id not in answer]
    if unknown or missing:
        problems = []
        if missing:
            problems.append(f"no decision for {missing}")
        if unknown:
            problems.append(f"{unknown} is not a pending call")
        raise ValueError(
            f"The answer to a tool approval must decide every pending call, and only those: "
            f"{'; '.join(problems)}. Pending calls: {pending}. A decision is {_FORMS}"
        )
    return {call_id: _decision(answer[call_id], by_id[call_id], tools) for call_id in by_id}


def _is_one_decision(answer: Any, by_id: Mapping[str, ToolCall]) -> bool:
    """Whether `answer` is a bare decision rather than a dict of them."""
    if isinstance(answer, str):
        return True
    if isinstance(answer, Mapping) and len(answer) == 1:
        [key] = answer
        return key in ("edit", "reject") and key not in by_id
    return False


def _decision(given: Any, call: ToolCall, tools: Mapping[str, ToolSpec]) -> Decision:
    where = f"call {call.id!r} ({call.name})"
    if given == "approve":
        return Decision("approve")
    if given == "reject":
        return Decision("reject")
    if isinstance(given, Mapping) and len(given) == 1:
        [(kind, value)] = given.items()
        if kind == "reject" and (value is None or isinstance(value, str)):
            return Decision("reject", reason=value or None)
        if kind == "edit" and isinstance(value, Mapping):
            return Decision("edit", args=_edited(dict(value), call, tools, where))
    raise ValueError(f"The decision for {where} is {_shown(given)}; a decision is {_FORMS}")


def _edited(
    args: dict[str, Any], call: ToolCall, tools: Mapping[str, ToolSpec], where: str
) -> dict[str, Any]:
    """The edited arguments as JSON data, checked as the model's arguments are."""
    spec = tools.get(call.name)
    if spec is None:
        raise ValueError(
            f"The arguments of {where} cannot be edited: this ToolNode has no tool named "
            f"{call.name!r} (any more). Approve or reject the call"
        )
    data: dict[str, Any] = tool_output(args)
    try:
        spec.validate(data)
    except ValidationError as exc:
        raise ValueError(
            f"The edited arguments for {where} are invalid: {brief(exc)}. An edit gives all "
            f"the arguments; fix them and resume again"
        ) from None
    return data


def _listed(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "args": call.args}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}..."


def rejected_text(call: ToolCall, reason: str | None) -> str:
    """What the model reads for a rejected call."""
    because = f": {reason}" if reason else ""
    return (
        f"Error: the call of tool {call.name!r} was rejected by the person reviewing it"
        f"{because}. It did not run."
    )


__all__ = ["APPROVAL_REASON", "Decision", "ask", "read_decisions", "rejected_text"]
