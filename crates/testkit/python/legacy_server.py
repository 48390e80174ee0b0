"""A 2025-era MCP server (the official Python SDK's FastMCP, stateful
Streamable HTTP with a session id) for Switchyard's upstream fallback test.

Usage: python legacy_server.py PORT
"""

import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("legacy-upstream", host="127.0.0.1", port=int(sys.argv[1]), log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.prompt()
def greet(name: str) -> str:
    """Greets someone."""
    return f"Hello, {name}!"


@server.resource("legacy://motd")
def motd() -> str:
    """The message of the day."""
    return "legacy says hi"


server.run(transport="streamable-http")
