// A real OAuth 2.1 authorization server for the tests: oidc-provider (OpenID certified) on
// loopback, configured from one JSON argument:
//   {modules, port, keyFile, audience, clockOffset?}
// Clients: "svc-rs256", "svc-es256", "svc-eddsa" (client credentials, JWT access tokens signed
// with that algorithm), "svc-opaque" (client credentials, opaque tokens), "mcp-server" (the
// resource server's credentials for introspection) and "agent" (a public client: authorization
// code with PKCE; the login and consent are answered at once for the account "alice").
// Every client's secret is "secret-<client id>". keyFile holds the private keys; it is created
// (one RS256, ES256 and EdDSA key, fresh kids) when missing, so a test rotates keys by
// restarting the server on a new file. clockOffset (seconds) moves the server's clock, so it
// issues tokens that are already expired for everyone else.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const options = JSON.parse(process.argv[2]);
if (options.clockOffset) {
  const realNow = Date.now;
  Date.now = () => realNow() + options.clockOffset * 1000;
}
const { default: Provider } = await import(
  pathToFileURL(path.join(options.modules, 'oidc-provider', 'lib', 'index.js')).href
);

function signingKeys() {
  if (fs.existsSync(options.keyFile)) {
    return JSON.parse(fs.readFileSync(options.keyFile, 'utf8'));
  }
  const make = (type, params, alg) => {
    const { privateKey } = crypto.generateKeyPairSync(type, params);
    return { ...privateKey.export({ format: 'jwk' }), alg, use: 'sig', kid: `${alg}-${crypto.randomUUID()}` };
  };
  const keys = [
    make('rsa', { modulusLength: 2048 }, 'RS256'),
    make('ec', { namedCurve: 'P-256' }, 'ES256'),
    make('ed25519', {}, 'EdDSA'),
  ];
  fs.writeFileSync(options.keyFile, JSON.stringify({ keys }), { mode: 0o600 });
  return { keys };
}

const SCOPES = 'notebooks:read notebooks:write code:execute server:admin';
const service = (id) => ({
  client_id: id,
  client_secret: `secret-${id}`,
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
});
const issuer = `http://127.0.0.1:${options.port}`;
const provider = new Provider(issuer, {
  jwks: signingKeys(),
  clients: [
    service('svc-rs256'),
    service('svc-es256'),
    service('svc-eddsa'),
    service('svc-opaque'),
    service('mcp-server'),
    {
      client_id: 'agent',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    },
  ],
  scopes: ['openid'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => options.audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource, client) => {
        const alg = { 'svc-rs256': 'RS256', 'svc-eddsa': 'EdDSA' }[client.clientId] ?? 'ES256';
        return {
          scope: SCOPES,
          audience: resource,
          accessTokenTTL: 600,
          accessTokenFormat: client.clientId === 'svc-opaque' ? 'opaque' : 'jwt',
          jwt: { sign: { alg } },
        };
      },
    },
  },
  findAccount: (ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  loadExistingGrant: async (ctx) => {
    // The consent the test's person gives: every scope asked for, on the resource asked for.
    const { accountId } = ctx.oidc.session ?? {};
    if (!accountId) return undefined;
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId });
    const scope = ctx.oidc.params.scope ?? '';
    const resource = ctx.oidc.params.resource ?? options.audience;
    grant.addResourceScope(resource, scope.split(' ').filter((s) => s !== 'openid').join(' '));
    grant.addOIDCScope('openid');
    await grant.save();
    return grant;
  },
});

const callback = provider.callback();
http
  .createServer(async (req, res) => {
    const match = req.url.match(/^\/interaction\/([^/?]+)/);
    if (!match) return callback(req, res);
    try {
      // The person logs in as alice; consent is the grant loadExistingGrant makes.
      await provider.interactionFinished(req, res, { login: { accountId: 'alice' } }, { mergeWithLastSubmission: false });
    } catch (e) {
      res.statusCode = 500;
      res.end(String(e));
    }
  })
  .listen(options.port, '127.0.0.1', () => console.log(`ready ${issuer}`));
