"""The used-by flow of an OAuth-protected Switchyard, with the official Python
MCP SDK (PyPI `mcp` 2.3, requirements-client.lock) as the client:

    python oauth_client.py MCP_URL legacy|2026-07-28

`legacy` speaks the 2025 era (initialize, then requests); `2026-07-28` the
stateless revision. The client starts with no token. On the 401 it reads the
protected resource metadata, discovers the authorization server, registers
itself dynamically, and runs authorization code + PKCE. The "browser" is
headless: an HTTP client with a cookie jar follows the authorization server's
redirects (the test server approves logins and consents at once) until the
redirect to our callback URI, whose code, state and issuer it hands back. Then
the client calls a tool.

Prints one JSON line: the tool's text, the scopes of the token used and the
registered client id.
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.types import TextContent

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the browser stops before it
MODES = ("legacy", "2026-07-28")


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessBrowser:
    """Follows the authorization server's redirects until our callback."""

    def __init__(self) -> None:
        self.callback: AuthorizationCodeResult | None = None

    async def visit(self, authorization_url: str) -> None:
        # One client for the whole chain: its cookie jar carries the
        # authorization server's interaction/session cookies.
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as browser:
            url = authorization_url
            for _ in range(12):
                response = await browser.get(url)
                location = response.headers.get("location")
                if location is None:
                    raise RuntimeError(f"stuck at {url}: HTTP {response.status_code} {response.text[:300]}")
                url = urljoin(url, location)
                if url.startswith(REDIRECT_URI):
                    query = parse_qs(urlparse(url).query)
                    if "code" not in query:
                        raise RuntimeError(f"authorization failed: {query}")
                    # mcp 2.x wants all three: state is compared with what it sent
                    # (None fails), iss is checked per RFC 9207 (and required when the
                    # server advertises authorization_response_iss_parameter_supported).
                    self.callback = AuthorizationCodeResult(
                        code=query["code"][0],
                        state=query.get("state", [None])[0],
                        iss=query.get("iss", [None])[0],
                    )
                    return
        raise RuntimeError("too many redirects")

    async def code(self) -> AuthorizationCodeResult:
        assert self.callback is not None, "the authorization redirect never reached the callback"
        return self.callback


async def main(url: str, mode: str) -> None:
    browser = HeadlessBrowser()
    storage = MemoryStorage()
    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="switchyard-e2e",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.visit,
        callback_handler=browser.code,
    )
    # Client(url_string) builds its own httpx2 client with no auth, so pass a
    # Transport: the streamable HTTP transport over an httpx2 client that carries
    # the OAuth provider. We own that httpx2 client's lifetime.
    async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            result = await client.call_tool("echo", {"text": "hello through oauth"})
    if result.is_error:
        raise RuntimeError(f"the tool failed: {result}")
    block = result.content[0]
    if not isinstance(block, TextContent):
        raise RuntimeError(f"expected text content, got {block!r}")
    scopes = storage.tokens.scope if storage.tokens else None
    client_id = storage.client_info.client_id if storage.client_info else None
    print(json.dumps({"text": block.text, "scope": scopes, "client_id": client_id}))


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode not in MODES:
        sys.exit(f"mode must be one of {MODES}, got {mode!r}")
    asyncio.run(main(sys.argv[1], mode))
