"""A 2025-era MCP server (the official Python SDK's FastMCP, stateful
Streamable HTTP with a session id) for Switchyard's upstream fallback test.

Usage: python legacy_server.py PORT

With PORT 0 it binds a free port itself and prints it as its first line, so
no other process can take the port between its choice and the bind.
"""

import os
import socket
import sys

import anyio
import uvicorn

from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel

server = FastMCP("legacy-upstream", host="127.0.0.1", port=int(sys.argv[1]), log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
async def steps(ctx: Context) -> str:
    """Reports three steps of progress, logging each at info level."""
    token = ctx.request_context.meta.progressToken if ctx.request_context.meta else None
    for step in (1, 2, 3):
        await ctx.info(f"step {step}")
        if token is not None:
            # On the call's own stream. `ctx.report_progress` (SDK 1.26) names
            # no request, so its progress goes to the session's GET stream.
            await ctx.session.send_progress_notification(token, step, 3, related_request_id=ctx.request_id)
    return "three steps"


class Proceed(BaseModel):
    ok: bool


@server.tool()
async def confirm(ctx: Context) -> str:
    """Asks the user, by elicitation, whether to proceed; twice if told no."""
    first = await ctx.elicit("Proceed?", Proceed)
    if first.action == "accept" and first.data.ok:
        return "proceeding"
    second = await ctx.elicit("Really not?", Proceed)
    return f"second answer: {second.action}"


@server.tool()
async def approve(ctx: Context) -> str:
    """Asks to approve; once answered, reports progress and logs, then answers."""
    answer = await ctx.elicit("Approve?", Proceed)
    token = ctx.request_context.meta.progressToken if ctx.request_context.meta else None
    if token is not None:
        await ctx.session.send_progress_notification(token, 1, 2, related_request_id=ctx.request_id)
    await ctx.info("approval recorded")
    return f"approval: {answer.action}"


cancelled_waits = 0


@server.tool()
async def wait(seconds: float) -> str:
    """Waits `seconds`, unless the request is cancelled first."""
    global cancelled_waits
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        cancelled_waits += 1
        raise
    return "waited"


@server.tool()
def cancelled() -> int:
    """How many waits were cancelled so far."""
    return cancelled_waits


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Hello, {name}!"


@server.resource("legacy://motd")
def motd() -> str:
    """The message of the day."""
    return "legacy says hi"


# The socket is bound here rather than by uvicorn so that the port it got is
# known (and printed) before anyone can connect: what `server.run` does, on it.
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
print(listener.getsockname()[1], flush=True)
# The test reads that one line and closes the pipe: nothing else may go there.
os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
anyio.run(uvicorn.Server(config).serve, [listener])
