import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { podAudience } from '../lib/session/relay.ts';
import { keysFrom, ReplayGuard, TokenError, verifyToken, type Claims } from './session-auth.ts';

const SUB = 'system:serviceaccount:kruntimes-system:kruntimes-run-extension-api';
const now = new Date('2026-11-29T12:00:00Z');
const t = now.getTime() / 1000;

function jwt(key: KeyObject, claims: Claims, kid = 'k1', alg = 'RS256'): string {
  const enc = (o: unknown): string => Buffer.from(JSON.stringify(o)).toString('base64url');
  const body = `${enc({ alg, kid })}.${enc(claims)}`;
  return `${body}.${sign('sha256', Buffer.from(body), key).toString('base64url')}`;
}

describe('runtimed session authentication (bound ServiceAccount JWT)', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const other = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keys = keysFrom({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid: 'k1' }] });
  const POD = '5f0c3c52-8a53-4d8e-9a43-2f6c7f1d1e01';
  const want = { audience: podAudience(POD), subject: SUB, now };
  const good: Claims = {
    sub: SUB,
    aud: [podAudience(POD)],
    exp: t + 600,
    iat: t,
    nbf: t,
    jti: 'c6a1d0a4-4a77-4c1f-9a59-1f0d7f0a3a11',
    iss: 'https://kubernetes.default.svc',
  };

  it("accepts the extension server's token minted for this Pod", () => {
    assert.equal(verifyToken(jwt(privateKey, good), keys, want).sub, SUB);
  });

  const bad: [string, () => string, RegExp][] = [
    [
      'another subject',
      () => jwt(privateKey, { ...good, sub: 'system:serviceaccount:team:attacker' }),
      /may not open sessions/,
    ],
    ['another audience', () => jwt(privateKey, { ...good, aud: ['https://kubernetes.default.svc'] }), /audience/],
    [
      'a token minted for another Pod',
      () => jwt(privateKey, { ...good, aud: [podAudience('0a0b0c0d-0000-4000-8000-000000000000')] }),
      /audience is not sessions\.kruntimes\.io\/pods\/5f0c3c52/,
    ],
    [
      'a token for any Pod (the unbound sessions audience)',
      () => jwt(privateKey, { ...good, aud: ['sessions.kruntimes.io'] }),
      /minted for one Pod/,
    ],
    ['a long-lived token', () => jwt(privateKey, { ...good, exp: t + 3600 }), /lifetime exceeds 660 s/],
    ['a token without iat', () => jwt(privateKey, { ...good, iat: undefined }), /lifetime/],
    ['a token without jti', () => jwt(privateKey, { ...good, jti: undefined }), /no jti/],
    ['an expired token', () => jwt(privateKey, { ...good, exp: t - 120 }), /expired/],
    ['a token without exp', () => jwt(privateKey, { sub: SUB, aud: 'sessions.kruntimes.io' }), /expired/],
    ['a future token', () => jwt(privateKey, { ...good, nbf: t + 120 }), /not yet valid/],
    ['a foreign signature', () => jwt(other.privateKey, good), /bad JWT signature/],
    ['an unknown key id', () => jwt(privateKey, good, 'k2'), /unknown signing key/],
    ['alg none', () => jwt(privateKey, good, 'k1', 'none'), /unsupported JWT algorithm/],
    ['garbage', () => 'a.b', /not a JWT/],
  ];
  for (const [name, make, msg] of bad) {
    it(`refuses ${name}`, () => {
      assert.throws(() => verifyToken(make(), keys, want), msg);
    });
  }

  it('accepts a token once: a replayed token is refused, expired entries are forgotten', () => {
    const guard = new ReplayGuard();
    guard.use(good, now);
    assert.throws(
      () => guard.use(good, now),
      (e: unknown) => e instanceof TokenError && /already used/.test(e.message),
    );
    guard.use({ ...good, jti: 'another' }, now);
    const later = new Date(now.getTime() + 700_000);
    guard.use({ ...good, jti: 'third', exp: t + 1300 }, later);
    guard.use(good, later);
  });

  it('fails closed when too many tokens are in flight', () => {
    const guard = new ReplayGuard(1);
    guard.use(good, now);
    assert.throws(() => guard.use({ ...good, jti: 'x' }, now), /too many session tokens/);
  });
});
