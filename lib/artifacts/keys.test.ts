import assert from 'node:assert/strict';
import { ArtifactKeyError, isSafeSegment, keyRoot, normalizePrefix, prefixProblem, runKeyPrefix } from './keys.ts';

const refused = (fn: () => unknown, message: RegExp): void =>
  assert.throws(
    fn,
    (e: unknown) => e instanceof ArtifactKeyError && e.reason === 'ArtifactKeyInvalid' && message.test(e.message),
  );

describe('lib/artifacts keys', () => {
  it('derives [<prefix>/]namespaces/<ns>/runs/<uid>/ from namespace, UID and the store prefix', () => {
    assert.equal(runKeyPrefix(undefined, 'ns', 'u1'), 'namespaces/ns/runs/u1/');
    assert.equal(runKeyPrefix(' /e2e/ ', 'ns', 'u1'), 'e2e/namespaces/ns/runs/u1/');
    assert.equal(runKeyPrefix('team/a', 'ns', 'u1'), 'team/a/namespaces/ns/runs/u1/');
    assert.equal(keyRoot(''), 'namespaces/');
    assert.equal(normalizePrefix('//a/b//'), 'a/b');
  });

  it('refuses prefixes with "..", "." or empty segments', () => {
    for (const p of ['a/../b', '..', 'a//b', './x', 'x/.', 'a\\b', 'a\0b']) {
      assert.ok(prefixProblem(normalizePrefix(p)), p);
      refused(() => runKeyPrefix(p, 'ns', 'u1'), /s3 prefix/);
    }
    assert.equal(prefixProblem('a/b.c/..d'), undefined, 'dots inside a segment are fine');
  });

  it('refuses a namespace or UID that is not exactly one segment', () => {
    for (const bad of ['', '.', '..', 'a/b', 'a\\b', '\uD800'])
      assert.equal(isSafeSegment(bad), false, JSON.stringify(bad));
    refused(() => runKeyPrefix('', '..', 'u1'), /run namespace "\.\." is not a safe path component/);
    refused(() => runKeyPrefix('', 'ns', ''), /run UID "" is not a safe path component/);
    refused(() => runKeyPrefix('', 'ns', 'u1/../../other'), /run UID/);
  });

  it('never lets one Run prefix contain another Run of the namespace', () => {
    const a = runKeyPrefix('p', 'ns', 'u1');
    const b = runKeyPrefix('p', 'ns', 'u10');
    assert.ok(!b.startsWith(a) && !a.startsWith(b));
  });
});
