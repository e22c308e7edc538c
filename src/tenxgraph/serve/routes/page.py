"""`GET /`: the chat page (one HTML file, no build step, no CDN)."""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route


async def chat_page(request: Request) -> Response:
    html = files("tenxgraph.serve").joinpath("page.html").read_text(encoding="utf-8")
    headers = {
        # everything is inline or same-origin; the page renders no HTML from messages
        "Content-Security-Policy": "default-src 'self'; script-src 'self' 'unsafe-inline'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'",
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
    }
    return HTMLResponse(html, headers=headers)


ROUTES = [Route("/", chat_page, methods=["GET"])]
