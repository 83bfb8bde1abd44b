import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { keysFrom, verifyToken, type Claims } from './session-auth.ts';

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
  const want = { audience: 'sessions.kruntimes.io', subject: SUB, now };
  const good: Claims = {
    sub: SUB,
    aud: ['sessions.kruntimes.io'],
    exp: t + 600,
    nbf: t - 1,
    iss: 'https://kubernetes.default.svc',
  };

  it('accepts the extension server token for the sessions audience', () => {
    assert.equal(verifyToken(jwt(privateKey, good), keys, want).sub, SUB);
  });

  const bad: [string, () => string, RegExp][] = [
    [
      'another subject',
      () => jwt(privateKey, { ...good, sub: 'system:serviceaccount:team:attacker' }),
      /may not open sessions/,
    ],
    ['another audience', () => jwt(privateKey, { ...good, aud: ['https://kubernetes.default.svc'] }), /audience/],
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
});
