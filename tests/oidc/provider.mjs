// A real OpenID provider for the sign-in tests: panva's oidc-provider (OpenID Certified), configured
// here and started by tests/e2e/oidc.py. Its own login form (devInteractions) takes any login name:
// that name is the account's `sub` and preferred_username. Configured by environment:
//   PORT, ISSUER           where it listens and the issuer it names;
//   REDIRECT_URIS          comma list: the agentsite callbacks (and login pages after logout) allowed.
// What a test changes between sign-ins goes to POST /__test__/state (JSON, merged):
//   accounts: {login: {groups, email, name}}   the claims of each account;
//   clockOffset: seconds                        the provider's clock moved (an expired ID token);
//   tamper: "audience" | "signature" | "nonce"  the token endpoint's ID token re-signed with that changed.
// GET /__test__/log lists the requests the provider served (the logout test reads it), and
// <issuer>/broken/.well-known/openid-configuration answers a page that is no discovery document.
import http from "node:http";
import { URL } from "node:url";

import { SignJWT, decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair } from "jose";
import Provider from "oidc-provider";

const port = Number(process.env.PORT);
const issuer = process.env.ISSUER;
const uris = (process.env.REDIRECT_URIS || "").split(",").filter(Boolean);
const callbacks = uris.filter((uri) => uri.endsWith("/callback/"));
const afterLogout = uris.filter((uri) => !uri.endsWith("/callback/"));

const state = { accounts: {}, clockOffset: 0, tamper: null };
const served = [];

// The provider's clock, which oidc-provider reads through Date.now (its epochTime helper).
const realNow = Date.now;
Date.now = () => realNow() + state.clockOffset * 1000;

const { privateKey } = await generateKeyPair("RS256", { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: "test-key", alg: "RS256", use: "sig" };
const stranger = (await generateKeyPair("RS256")).privateKey; // signs the "signature" tampering

const client = (id) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  redirect_uris: callbacks,
  post_logout_redirect_uris: afterLogout,
  grant_types: ["authorization_code"],
  response_types: ["code"],
});

const configuration = {
  clients: [client("agentsite"), client("agentsite-other")],
  jwks: { keys: [signingKey] },
  cookies: { keys: ["test-cookie-key-1"] },
  pkce: { required: () => true }, // every client, not only public ones: S256 is the only method it takes
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name", "preferred_username", "given_name", "family_name"],
    groups: ["groups"],
  },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        const account = state.accounts[id] || {};
        return {
          sub: id,
          preferred_username: account.preferred_username ?? id,
          email: account.email ?? `${id}@example.test`,
          email_verified: true,
          name: account.name ?? `${id} Tester`,
          groups: account.groups ?? [],
        };
      },
    };
  },
  // A first-party client: the scopes it asks for are granted without a consent page
  // (oidc-provider's documented recipe for skipping consent).
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      const grant = await ctx.oidc.provider.Grant.find(grantId);
      if (grant) return grant;
    }
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope("openid email profile groups");
    await grant.save();
    return grant;
  },
};

const provider = new Provider(issuer, configuration);

// After the token endpoint answered: its ID token re-signed with one thing wrong, as a provider
// that misbehaves (or an attacker in the middle) would send it.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path !== "/token" || !state.tamper || !ctx.body?.id_token) return;
  const claims = decodeJwt(ctx.body.id_token);
  const header = decodeProtectedHeader(ctx.body.id_token);
  let key = privateKey;
  if (state.tamper === "audience") claims.aud = "agentsite-other";
  if (state.tamper === "nonce") claims.nonce = "not-the-nonce";
  if (state.tamper === "signature") key = stranger;
  ctx.body = { ...ctx.body, id_token: await new SignJWT(claims).setProtectedHeader(header).sign(key) };
});

const handler = provider.callback();
const server = http.createServer((req, res) => {
  const url = new URL(req.url, issuer);
  served.push(`${req.method} ${url.pathname}`);
  if (url.pathname === "/__test__/state" && req.method === "POST") {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      Object.assign(state, JSON.parse(body || "{}"));
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(state));
    });
    return;
  }
  if (url.pathname === "/__test__/log") {
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(served));
    return;
  }
  if (url.pathname === "/broken/.well-known/openid-configuration") {
    res.writeHead(200, { "content-type": "text/html" }).end("<html><body>Not a discovery document</body></html>");
    return;
  }
  handler(req, res);
});
server.listen(port, "127.0.0.1", () => console.log(`oidc-provider listening on ${issuer}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
