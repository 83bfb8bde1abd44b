/**
 * Who may open a session operation on runtimed: only the extension API server, proven by a
 * ServiceAccount token it requests for this Pod alone (audience `sessions.kruntimes.io/pods/<uid>`),
 * short-lived and used once (its `jti`). runtimed
 * verifies the token offline against the API server's service-account signing keys
 * (/openid/v1/jwks, readable by every ServiceAccount through the default
 * system:service-account-issuer-discovery binding), so it needs no TokenReview permission.
 */
import { createPublicKey, verify, type JsonWebKey, type KeyObject } from 'node:crypto';
import type { KubeClient } from '../lib/kube/client.ts';

export interface Expect {
  /** The only audience accepted: this Pod's (podAudience(POD_UID)); a token for any other Pod is refused. */
  audience: string;
  subject: string;
  now: Date;
  /** Longest accepted lifetime (exp - iat), seconds: session tokens are short-lived. */
  maxLifetimeSeconds?: number;
}
export interface Claims {
  iss?: string;
  sub?: string;
  aud?: string | string[];
  exp?: number;
  nbf?: number;
  iat?: number;
  jti?: string;
}

/** Session tokens live 600 s (TokenRequest's minimum); a minute of slack for clock skew. */
export const MAX_SESSION_TOKEN_SECONDS = 660;
export type Keys = Map<string, KeyObject>;

const ALGS: Record<string, { hash: string; ec?: boolean }> = {
  RS256: { hash: 'sha256' },
  RS384: { hash: 'sha384' },
  RS512: { hash: 'sha512' },
  ES256: { hash: 'sha256', ec: true },
  ES384: { hash: 'sha384', ec: true },
};

function part<T>(s: string | undefined): T | undefined {
  try {
    return s ? (JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as T) : undefined;
  } catch {
    return undefined;
  }
}

export class TokenError extends Error {
  constructor(
    message: string,
    readonly unknownKey = false,
  ) {
    super(message);
  }
}

/** Verifies signature, audience, subject and validity window; returns the claims or throws TokenError. */
export function verifyToken(token: string, keys: Keys, want: Expect): Claims {
  const [h, p, sig, extra] = token.split('.');
  if (!h || !p || !sig || extra !== undefined) throw new TokenError('not a JWT');
  const header = part<{ alg?: string; kid?: string }>(h);
  const claims = part<Claims>(p);
  if (!header || !claims) throw new TokenError('malformed JWT');
  const alg = ALGS[header.alg ?? ''];
  if (!alg) throw new TokenError(`unsupported JWT algorithm ${String(header.alg)}`);
  const key = header.kid !== undefined ? keys.get(header.kid) : keys.size === 1 ? [...keys.values()][0] : undefined;
  if (!key) throw new TokenError(`unknown signing key ${String(header.kid)}`, true);
  const ok = verify(
    alg.hash,
    Buffer.from(`${h}.${p}`),
    alg.ec ? { key, dsaEncoding: 'ieee-p1363' } : key,
    Buffer.from(sig, 'base64url'),
  );
  if (!ok) throw new TokenError('bad JWT signature');
  checkClaims(claims, want);
  return claims;
}

function checkClaims(claims: Claims, want: Expect): void {
  const t = Math.floor(want.now.getTime() / 1000);
  if (typeof claims.exp !== 'number' || claims.exp + 30 < t) throw new TokenError('token expired');
  if (typeof claims.nbf === 'number' && claims.nbf - 30 > t) throw new TokenError('token not yet valid');
  const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!aud.includes(want.audience))
    throw new TokenError(`token audience is not ${want.audience} (a session token is minted for one Pod)`);
  if (claims.sub !== want.subject) throw new TokenError(`token subject ${String(claims.sub)} may not open sessions`);
  const max = want.maxLifetimeSeconds ?? MAX_SESSION_TOKEN_SECONDS;
  if (typeof claims.iat !== 'number' || claims.exp - claims.iat > max)
    throw new TokenError(`token lifetime exceeds ${max} s (session tokens are short-lived)`);
  if (typeof claims.jti !== 'string' || !claims.jti) throw new TokenError('token has no jti (it cannot be used once)');
}

/** Remembers the jti of every accepted token until it expires: a session token is accepted once. */
export class ReplayGuard {
  private readonly seen = new Map<string, number>();
  constructor(private readonly limit = 100_000) {}

  /** Throws TokenError when the token was used before (or the guard is full: fail closed). */
  use(claims: Claims, now: Date): void {
    const t = Math.floor(now.getTime() / 1000);
    for (const [jti, exp] of this.seen) if (exp + 30 < t) this.seen.delete(jti);
    const jti = claims.jti ?? '';
    if (this.seen.has(jti)) throw new TokenError('token was already used (session tokens are single-use)');
    if (this.seen.size >= this.limit) throw new TokenError('too many session tokens in flight; retry later');
    this.seen.set(jti, claims.exp ?? t);
  }
}

export function keysFrom(jwks: { keys?: (JsonWebKey & { kid?: string })[] }): Keys {
  const m: Keys = new Map();
  for (const k of jwks.keys ?? []) {
    try {
      m.set(k.kid ?? '', createPublicKey({ key: k, format: 'jwk' }));
    } catch {
      /* skip keys node cannot use */
    }
  }
  return m;
}

/** The signing keys, fetched on first use and refetched (at most every 10 s) when a token names an unknown key. */
export class Jwks {
  private keys: Keys = new Map();
  private fetchedAt = 0;
  constructor(private readonly client: KubeClient) {}

  private async refresh(): Promise<void> {
    if (Date.now() - this.fetchedAt < 10_000 && this.keys.size) return;
    this.fetchedAt = Date.now();
    this.keys = keysFrom(
      await this.client.request<{ keys?: (JsonWebKey & { kid?: string })[] }>('GET', '/openid/v1/jwks', {
        accept: 'application/jwk-set+json',
      }),
    );
  }

  private readonly replays = new ReplayGuard();

  /** Verifies the token and consumes it: the same token is refused the next time. */
  async verify(token: string, want: Expect): Promise<Claims> {
    if (!this.keys.size) await this.refresh();
    let claims: Claims;
    try {
      claims = verifyToken(token, this.keys, want);
    } catch (err) {
      if (!(err instanceof TokenError) || !err.unknownKey) throw err;
      await this.refresh();
      claims = verifyToken(token, this.keys, want);
    }
    this.replays.use(claims, want.now);
    return claims;
  }
}
