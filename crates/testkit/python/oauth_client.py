"""The used-by flow of an OAuth-protected Switchyard, with the official Python
MCP SDK as the client: python oauth_client.py MCP_URL.

The client starts with no token. On the 401 it reads the protected resource
metadata, discovers the authorization server, registers itself dynamically,
and runs authorization code + PKCE. The "browser" is headless: an HTTP client
with a cookie jar follows the authorization server's redirects (the test
server approves logins and consents at once) until the redirect to our
callback URI, whose code it hands back. Then the client calls a tool.

Prints one JSON line: the tool's text and the scopes of the token used.
"""

import asyncio
import json
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the browser stops before it


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
        self.callback: tuple[str, str | None] | None = None

    async def visit(self, authorization_url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=False, timeout=10) as browser:
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
                    self.callback = (query["code"][0], query.get("state", [None])[0])
                    return
        raise RuntimeError("too many redirects")

    async def code(self) -> tuple[str, str | None]:
        assert self.callback is not None, "the authorization redirect never reached the callback"
        return self.callback


async def main(url: str) -> None:
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
    async with streamablehttp_client(url, auth=auth) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": "hello through oauth"})
    text = result.content[0].text
    scopes = storage.tokens.scope if storage.tokens else None
    print(json.dumps({"text": text, "scope": scopes, "client_id": storage.client_info.client_id}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
