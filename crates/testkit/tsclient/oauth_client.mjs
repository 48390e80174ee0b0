// The used-by flow of an OAuth-protected Switchyard, with the official
// TypeScript MCP client (@modelcontextprotocol/client 2.4, package-lock.json):
//   node oauth_client.mjs MCP_URL legacy|2026-07-28
// As python/oauth_client.py: no token at first; on the 401 the client reads the
// protected resource metadata, registers dynamically and runs authorization
// code + PKCE, the "browser" being a redirect follower with a cookie jar; then
// it calls `echo`. Prints one JSON line {"text","scope","client_id"}.
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';

const [url, mode] = process.argv.slice(2);
if (!['legacy', '2026-07-28'].includes(mode)) throw new Error(`mode must be legacy or 2026-07-28, got ${mode}`);
const REDIRECT_URI = 'http://127.0.0.1:9/callback'; // never contacted

/** Minimal cookie jar: the authorization server's interaction cookies across the redirect chain. */
class Jar {
  cookies = new Map();
  absorb(response) {
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attrs.some(a => /^\s*max-age\s*=\s*0\s*$/i.test(a))
        || attrs.some(a => /^\s*expires\s*=/i.test(a) && Date.parse(a.split('=').slice(1).join('=')) < Date.now());
      if (expired || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

class HeadlessProvider {
  #tokens; #client; #verifier; #discovery;
  state_ = crypto.randomUUID();
  callback; // URLSearchParams of the callback redirect

  get redirectUrl() { return REDIRECT_URI; }
  get clientMetadata() {
    return {
      client_name: 'switchyard-e2e',
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() { return this.state_; }
  clientInformation() { return this.#client; }
  saveClientInformation(info) { this.#client = info; }
  tokens() { return this.#tokens; }
  saveTokens(tokens) { this.#tokens = tokens; }
  saveCodeVerifier(v) { this.#verifier = v; }
  codeVerifier() { if (!this.#verifier) throw new Error('no code verifier'); return this.#verifier; }
  // Implement these: finishAuth() checks the issuer recorded here (SEP-2352), and
  // throws AuthorizationServerMismatchError if saveDiscoveryState exists but nothing was saved.
  saveDiscoveryState(s) { this.#discovery = s; }
  discoveryState() { return this.#discovery; }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'client') this.#client = undefined;
    if (scope === 'all' || scope === 'tokens') this.#tokens = undefined;
    if (scope === 'all' || scope === 'verifier') this.#verifier = undefined;
    if (scope === 'all' || scope === 'discovery') this.#discovery = undefined;
  }
  // The "browser": awaited by auth() before it returns 'REDIRECT'.
  async redirectToAuthorization(authorizationUrl) {
    const jar = new Jar();
    let at = new URL(authorizationUrl);
    for (let i = 0; i < 12; i++) {
      const headers = jar.cookies.size ? { cookie: jar.header() } : {};
      const response = await fetch(at, { redirect: 'manual', headers });
      jar.absorb(response);
      const location = response.headers.get('location');
      const body = await response.text();
      if (!location) throw new Error(`stuck at ${at}: HTTP ${response.status} ${body.slice(0, 300)}`);
      at = new URL(location, at);
      if (at.href.startsWith(REDIRECT_URI)) {
        if (!at.searchParams.get('code')) throw new Error(`authorization failed: ${at.search}`);
        this.callback = at.searchParams;
        return;
      }
    }
    throw new Error('too many redirects');
  }
  get issued() { return { scope: this.#tokens?.scope, client_id: this.#client?.client_id }; }
}

const versionNegotiation = mode === 'legacy' ? { mode: 'legacy' } : { mode: { pin: mode } };
const provider = new HeadlessProvider();

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: 'switchyard-e2e', version: '1.0.0' }, { versionNegotiation });
  try {
    await client.connect(transport);
    return client;
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || !provider.callback) throw error;
    // The SDK does not check state; we do.
    if (provider.callback.get('state') !== provider.state_) throw new Error('state mismatch');
    await transport.finishAuth(provider.callback); // validates iss, exchanges code + verifier
    const retry = new Client({ name: 'switchyard-e2e', version: '1.0.0' }, { versionNegotiation });
    await retry.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
    return retry;
  }
}

const client = await connect();
const result = await client.callTool({ name: 'echo', arguments: { text: 'hello through oauth' } });
await client.close();
const block = result.content[0];
if (result.isError || block?.type !== 'text') throw new Error(`unexpected result: ${JSON.stringify(result)}`);
console.log(JSON.stringify({ text: block.text, ...provider.issued }));
