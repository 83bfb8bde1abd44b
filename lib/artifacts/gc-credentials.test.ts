import assert from 'node:assert/strict';
import { notCovered, parseGcSecret, s3ClientOptions } from './gc-credentials.ts';

const b64 = (o: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));

describe('lib/artifacts gc credentials', () => {
  it('parses the Secret and requires bucket and keys', () => {
    const c = parseGcSecret(
      b64({ bucket: 'b', endpoint: 'http://s3:9000/', AWS_ACCESS_KEY_ID: 'k', AWS_SECRET_ACCESS_KEY: 's' }),
    );
    assert.deepEqual(c, { bucket: 'b', endpoint: 'http://s3:9000', accessKeyId: 'k', secretAccessKey: 's' });
    assert.match((parseGcSecret(b64({ bucket: 'b' })) as { problem: string }).problem, /needs the keys/);
    assert.ok('problem' in parseGcSecret(undefined));
  });

  it('covers only the bound bucket and endpoint (fail closed)', () => {
    const creds = { bucket: 'b', endpoint: 'http://s3:9000' };
    assert.equal(notCovered(creds, { bucket: 'b', endpoint: 'http://s3:9000/', prefix: 'x' }), undefined);
    assert.match(notCovered(creds, { bucket: 'c', endpoint: 'http://s3:9000' }) ?? '', /bucket c/);
    assert.match(notCovered(creds, { bucket: 'b', endpoint: 'http://evil:9000' }) ?? '', /endpoint http:\/\/evil/);
    assert.match(notCovered(creds, { bucket: 'b' }) ?? '', /\(AWS\)/);
    assert.equal(notCovered({ bucket: 'b', endpoint: '' }, { bucket: 'b' }), undefined);
  });

  it('asks only for required checksums from custom endpoints', () => {
    assert.deepEqual(s3ClientOptions({ region: 'r' }), { region: 'r', forcePathStyle: false });
    assert.equal(s3ClientOptions({ region: 'r', endpoint: 'http://x' }).requestChecksumCalculation, 'WHEN_REQUIRED');
  });
});
