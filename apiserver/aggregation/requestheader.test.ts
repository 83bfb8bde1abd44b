import assert from 'node:assert/strict';
import { RequestHeaderSource, type RequestHeaderConfig } from './requestheader.ts';

const base: RequestHeaderConfig = {
  clientCA: 'CA-1',
  allowedNames: ['front-proxy-client'],
  usernameHeaders: ['X-Remote-User'],
  groupHeaders: ['X-Remote-Group'],
  extraPrefixes: ['X-Remote-Extra-'],
  uidHeaders: [],
};

describe('requestheader configuration reload', () => {
  it('tells listeners when the client CA rotates, and only then', async () => {
    let next = base;
    const source = await RequestHeaderSource.start(() => Promise.resolve(next));
    const heard: string[] = [];
    source.onClientCAChange((ca) => heard.push(ca));
    await source.refresh();
    assert.deepEqual(heard, []);
    next = { ...base, clientCA: 'CA-1\nCA-2' };
    await source.refresh();
    assert.deepEqual(heard, ['CA-1\nCA-2']);
    assert.equal(source.current().clientCA, 'CA-1\nCA-2');
    next = { ...next, allowedNames: ['other'] };
    await source.refresh();
    assert.deepEqual(heard, ['CA-1\nCA-2'], 'other changes are picked up without a TLS reload');
    assert.deepEqual(source.current().allowedNames, ['other']);
  });

  it('keeps the previous configuration when a reload fails', async () => {
    let fail = false;
    const source = await RequestHeaderSource.start(() =>
      fail ? Promise.reject(new Error('forbidden')) : Promise.resolve(base),
    );
    fail = true;
    await assert.rejects(source.refresh(), /forbidden/);
    assert.equal(source.current().clientCA, 'CA-1');
  });
});
