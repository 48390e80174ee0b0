// A real OAuth authorization server for Switchyard's tests, on loopback:
// node server.mjs PORT. Clients are fixed below (plus any registered
// dynamically); nothing is persisted.
//
// Access tokens for a resource (RFC 8707 `resource=`) are RS256 JWTs whose
// `aud` is the resource, except for the client `mcp-opaque`, whose tokens are
// opaque and checked through introspection. Test hooks: the client
// `mcp-short` gets 2-second tokens, `mcp-future` gets tokens valid from an
// hour ahead, and `POST /test/rotate` rotates the signing key (the old key
// stays published; new tokens carry the new `kid`), `POST
// /test/introspection-delay?ms=N` holds every introspection request N ms
// before answering it, and `GET /test/introspection-load` tells how many were
// asked in all and how many were in flight at most. An authorization request
// without `scope` gets the default scope `mcp`, as Keycloak's default client
// scopes or Entra's `.default` do (oidc-provider alone refuses a request that
// ends with no scope granted; a client that finds no scope named in the
// challenge or the metadata, like the TypeScript SDK, sends none). Logins and consents are
// approved at once for the account `test-user`, so the authorization code
// flow runs headless.
//
// Token exchange (RFC 8693), as a grant registered on the provider: the
// client `switchyard-exchanger` may exchange an access token this server
// issued (checked: signature, issuer, expiry) for an RS256 JWT whose `aud` is
// the requested `resource` or `audience`, whose `sub` is the subject token's,
// and whose `act` names the exchanger. The policy: only a subject token
// granting `tools:call` is exchanged (the user let tools be called on their
// behalf); any other is refused with `invalid_grant`. `GET /test/exchanges`
// tells how many exchanges were asked.
import crypto from 'node:crypto';
import http from 'node:http';
import Provider, { errors } from 'oidc-provider';

const port = Number(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;
const RESOURCE_SCOPES = 'mcp tools:call units units:convert math switchyard:admin';
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const exchanges = { total: 0 };

function signingKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };
}

const confidential = (client_id, extra = {}) => ({
  client_id,
  client_secret: `${client_id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: 'client_secret_post',
  scope: RESOURCE_SCOPES,
  ...extra,
});

function makeProvider(keys) {
  const provider = new Provider(issuer, {
    jwks: { keys },
    clients: [
      // What an upstream plugin's `client_credentials` auth uses.
      {
        client_id: 'switchyard-upstream',
        client_secret: 'upstream-secret',
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        token_endpoint_auth_method: 'client_secret_post',
        scope: 'tools:read',
      },
      confidential('mcp-test'),
      // What an upstream plugin's `token_exchange` auth uses.
      confidential('switchyard-exchanger', { grant_types: ['client_credentials', TOKEN_EXCHANGE] }),
      confidential('mcp-short'),
      confidential('mcp-future'),
      confidential('mcp-opaque'),
      // Switchyard itself, asking about opaque tokens.
      confidential('switchyard-introspector', { token_endpoint_auth_method: 'client_secret_basic' }),
    ],
    // offline_access turns on the refresh_token grant (public clients get rotated refresh tokens).
    scopes: ['tools:read', 'offline_access', ...RESOURCE_SCOPES.split(' ')],
    findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
    clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' },
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      introspection: { enabled: true },
      revocation: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx, client, oneOf) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resourceIndicator, client) => ({
          scope: RESOURCE_SCOPES,
          audience: resourceIndicator,
          accessTokenTTL: client.clientId === 'mcp-short' ? 2 : 600,
          accessTokenFormat: client.clientId === 'mcp-opaque' ? 'opaque' : 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    extraTokenClaims: (ctx, token) =>
      token.clientId === 'mcp-future' ? { nbf: Math.floor(Date.now() / 1000) + 3600 } : undefined,
    // Loopback test clients register http://127.0.0.1 redirect URIs.
    pkce: { required: () => true },
  });
  // Plain http on loopback is what the tests run; the provider would
  // otherwise insist on https for some client metadata.
  provider.proxy = true;
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    exchange,
    ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope'],
  );
  return provider;
}

const base64url = (data) => Buffer.from(data).toString('base64url');

// The claims of `token` if one of our keys signed it, it is ours and it has
// not expired; else undefined.
function verified(token) {
  const [header, payload, signature] = String(token).split('.');
  if (!signature) return undefined;
  let kid;
  let claims;
  try {
    kid = JSON.parse(Buffer.from(header, 'base64url')).kid;
    claims = JSON.parse(Buffer.from(payload, 'base64url'));
  } catch {
    return undefined;
  }
  const key = keys.find((k) => k.kid === kid);
  if (!key) return undefined;
  const publicKey = crypto.createPublicKey({ key, format: 'jwk' });
  const signed = crypto.verify('sha256', Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, 'base64url'));
  const now = Math.floor(Date.now() / 1000);
  return signed && claims.iss === issuer && claims.exp > now ? claims : undefined;
}

function signed(claims) {
  const key = keys[0];
  const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'at+jwt', kid: key.kid }));
  const payload = base64url(JSON.stringify(claims));
  const privateKey = crypto.createPrivateKey({ key, format: 'jwk' });
  const signature = crypto.sign('sha256', Buffer.from(`${header}.${payload}`), privateKey);
  return `${header}.${payload}.${signature.toString('base64url')}`;
}

async function exchange(ctx) {
  exchanges.total += 1;
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('subject_token_type must be an access token');
  }
  const subject = verified(params.subject_token);
  if (!subject) throw new errors.InvalidGrant('the subject token is not a valid token of this server');
  const held = String(subject.scope || '').split(' ').filter(Boolean);
  if (!held.includes('tools:call')) {
    throw new errors.InvalidGrant('the subject did not let tools be called on its behalf');
  }
  const audience = params.resource || params.audience;
  if (!audience) throw new errors.InvalidTarget('name the upstream in resource or audience');
  const asked = params.scope ? params.scope.split(' ') : held;
  const scope = asked.filter((s) => held.includes(s)).join(' ');
  const now = Math.floor(Date.now() / 1000);
  const ttl = 600;
  ctx.body = {
    access_token: signed({
      iss: issuer, sub: subject.sub, aud: audience, scope, client_id: client.clientId,
      act: { sub: client.clientId }, iat: now, exp: now + ttl, jti: crypto.randomUUID(),
    }),
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: ttl,
    scope,
  };
}

// Approves every login and consent for `test-user`.
async function interact(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: 'test-user' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    const missing = prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    if (missing.missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
    }
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
}

let keys = [signingKey()];
let provider = makeProvider(keys);
const introspection = { delayMs: 0, inFlight: 0, peak: 0, total: 0 };

const server = http.createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/test/rotate') {
      keys = [signingKey(), ...keys];
      provider = makeProvider(keys);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kid: keys[0].kid }));
      return;
    }
    if (req.method === 'POST' && req.url.startsWith('/test/introspection-delay')) {
      introspection.delayMs = Number(new URL(req.url, issuer).searchParams.get('ms'));
      res.writeHead(204).end();
      return;
    }
    if (req.method === 'GET' && req.url === '/test/exchanges') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(exchanges));
      return;
    }
    if (req.method === 'GET' && req.url === '/test/introspection-load') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ total: introspection.total, peak: introspection.peak }));
      return;
    }
    if (req.url === '/token/introspection') {
      introspection.total += 1;
      introspection.inFlight += 1;
      introspection.peak = Math.max(introspection.peak, introspection.inFlight);
      res.on('close', () => { introspection.inFlight -= 1; });
      await new Promise((resolve) => setTimeout(resolve, introspection.delayMs));
    }
    if (req.method === 'GET' && (req.url === '/auth' || req.url.startsWith('/auth?'))) {
      const url = new URL(req.url, issuer);
      if (!url.searchParams.get('scope')) {
        url.searchParams.set('scope', 'mcp');
        req.url = `${url.pathname}${url.search}`;
      }
    }
    if (req.url.startsWith('/interaction/')) {
      await interact(provider, req, res);
      return;
    }
    provider.callback()(req, res);
  } catch (error) {
    res.writeHead(500, { 'content-type': 'text/plain' });
    res.end(String(error));
  }
});

server.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening at ${issuer}`);
});
