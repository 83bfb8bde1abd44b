/**
 * Who may open a session operation on runtimed: only the extension API server, proven by a
 * bound ServiceAccount token it requests with audience `sessions.kruntimes.io`. runtimed
 * verifies the token offline against the API server's service-account signing keys
 * (/openid/v1/jwks, readable by every ServiceAccount through the default
 * system:service-account-issuer-discovery binding), so it needs no TokenReview permission.
 */
import { createPublicKey, verify, type JsonWebKey, type KeyObject } from 'node:crypto';
import type { KubeClient } from '../lib/kube/client.ts';

export interface Expect {
  audience: string;
  subject: string;
  now: Date;
}
export interface Claims {
  iss?: string;
  sub?: string;
  aud?: string | string[];
  exp?: number;
  nbf?: number;
  iat?: number;
}
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
  if (!aud.includes(want.audience)) throw new TokenError(`token audience is not ${want.audience}`);
  if (claims.sub !== want.subject) throw new TokenError(`token subject ${String(claims.sub)} may not open sessions`);
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

  async verify(token: string, want: Expect): Promise<Claims> {
    if (!this.keys.size) await this.refresh();
    try {
      return verifyToken(token, this.keys, want);
    } catch (err) {
      if (!(err instanceof TokenError) || !err.unknownKey) throw err;
      await this.refresh();
      return verifyToken(token, this.keys, want);
    }
  }
}
