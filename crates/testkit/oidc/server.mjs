// A real OAuth authorization server for Switchyard's tests, on loopback:
// node server.mjs PORT. Clients are fixed below; nothing is persisted.
import Provider from 'oidc-provider';

const port = Number(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      // What an upstream plugin's `client_credentials` auth uses.
      client_id: 'switchyard-upstream',
      client_secret: 'upstream-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_post',
      scope: 'tools:read',
    },
  ],
  scopes: ['tools:read'],
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
  },
});

provider.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening at ${issuer}`);
});
