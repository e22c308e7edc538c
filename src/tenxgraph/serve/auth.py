"""Who is asking. The server calls an `Authenticate` function with each request: it returns
the caller's identity (any string: a user id, a tenant...), or None to refuse it with 401.
Every thread, run and store item belongs to the identity that made it, and is invisible to
every other: another user's thread answers 404, exactly as one that does not exist."""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Awaitable, Callable, Mapping

from starlette.requests import Request

Authenticate = Callable[[Request], "str | Awaitable[str | None] | None"]
ANONYMOUS = ""  # the owner of everything on a server without auth


def bearer_tokens(tokens: Mapping[str, str]) -> Authenticate:
    """An `Authenticate` for `Authorization: Bearer <token>`: `tokens` maps each accepted
    token to its user. Tokens are compared in constant time."""
    known = [(token.encode(), user) for token, user in tokens.items()]
    if not known or any(not token for token, _ in known):
        raise ValueError("bearer_tokens needs at least one token, and no empty one")

    def authenticate(request: Request) -> str | None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return None
        found = None
        for token, user in known:  # every token compared, so the time tells nothing
            if hmac.compare_digest(token, given.strip().encode()):
                found = user
        return found

    return authenticate


async def identify(authenticate: Authenticate | None, request: Request) -> str | None:
    """The caller's identity, `ANONYMOUS` without auth, or None when refused."""
    if authenticate is None:
        return ANONYMOUS
    who = authenticate(request)
    if inspect.isawaitable(who):
        who = await who
    if who is not None and not isinstance(who, str):
        raise TypeError(f"the server's auth function must return a str or None, got {who!r}")
    return who


__all__ = ["ANONYMOUS", "Authenticate", "bearer_tokens", "identify"]
