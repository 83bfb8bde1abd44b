import assert from 'node:assert/strict';
import { forbiddenMessage, sessionAccessReview } from './authorize.ts';

const who = { username: 'alice', uid: 'u-1', groups: ['team-a', 'system:authenticated'], extra: { scopes: ['x'] } };

describe('session authorisation (create on runs/session)', () => {
  it('asks about create on runs/session of this Run, for the proxied user with groups, uid and extra', () => {
    assert.deepEqual(sessionAccessReview(who, 'team-a', 'shell'), {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: 'alice',
        uid: 'u-1',
        groups: ['team-a', 'system:authenticated'],
        extra: { scopes: ['x'] },
        resourceAttributes: {
          namespace: 'team-a',
          verb: 'create',
          group: 'sessions.kruntimes.io',
          resource: 'runs',
          subresource: 'session',
          name: 'shell',
        },
      },
    });
  });
  it('allows only an explicit allowed answer', () => {
    assert.equal(forbiddenMessage(who, 'team-a', 'shell', { allowed: true }), undefined);
    for (const st of [undefined, {}, { allowed: false }, { allowed: true, denied: true }])
      assert.match(
        forbiddenMessage(who, 'team-a', 'shell', st) ?? '',
        /User "alice" cannot create resource "runs\/session" in API group "sessions.kruntimes.io" in the namespace "team-a"/,
      );
  });
});
