import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { manifestFiles, PLUGIN_MARKER, runPluginItem } from './node-agent-plugins.ts';

describe('devws-node plugin executions (inside the sandbox, on the home volume)', () => {
  let home = '';
  beforeEach(() => {
    home = mkdtempSync(join(tmpdir(), 'krt-plugins-'));
  });
  afterEach(() => rmSync(home, { recursive: true, force: true }));

  const manifest = JSON.stringify({ description: 'lint rules', files: { 'rules/a.yaml': 'a: 1', README: 'hi' } });
  const install = (id: string, m = manifest, name = 'lint'): ReturnType<typeof runPluginItem> =>
    runPluginItem(home, { id, name, action: 'install', manifest: m });
  const dir = (name = 'lint'): string => join(home, '.krt', 'plugins', name);

  it('install writes the manifest and its files under ~/.krt/plugins/<name> with the execution ID as marker', () => {
    assert.deepEqual(install('ws-plg-1'), { id: 'ws-plg-1', result: 'installed' });
    assert.equal(readFileSync(join(dir(), 'plugin.json'), 'utf8'), manifest);
    assert.equal(readFileSync(join(dir(), 'rules', 'a.yaml'), 'utf8'), 'a: 1');
    assert.equal(readFileSync(join(dir(), 'README'), 'utf8'), 'hi');
    const marker = JSON.parse(readFileSync(join(dir(), PLUGIN_MARKER), 'utf8')) as { executionId: string };
    assert.equal(marker.executionId, 'ws-plg-1');
  });

  it('an execution repeated with the same ID (a Node restarted mid-step) reports installed without installing again', () => {
    install('ws-plg-1');
    writeFileSync(join(dir(), 'README'), 'changed by the user');
    assert.deepEqual(install('ws-plg-1'), { id: 'ws-plg-1', result: 'installed' });
    assert.equal(readFileSync(join(dir(), 'README'), 'utf8'), 'changed by the user', 'not installed again');
    assert.equal(install('ws-plg-2').result, 'installed');
    assert.equal(readFileSync(join(dir(), 'README'), 'utf8'), 'hi', 'another execution replaces the directory');
  });

  it('a bad manifest is a failed item with a message, and nothing is written', () => {
    for (const [m, why] of [
      ['not json', /not JSON/],
      ['[1]', /not a JSON object/],
      ['{"files":{"../escape":"x"}}', /not a plain relative path/],
      ['{"files":{"/abs":"x"}}', /not a plain relative path/],
      ['{"files":{".krt-plugin.json":"x"}}', /not a plain relative path/],
      ['{"files":{"a":1}}', /is not a string/],
    ] as const) {
      const r = install('ws-plg-bad', m);
      assert.equal(r.result, 'failed', m);
      assert.match(r.message ?? '', why);
      assert.match(r.message ?? '', /^invalid_plugin_manifest/);
    }
    assert.equal(existsSync(dir()), false);
  });

  it('refuses a ~/.krt/plugins that is a link planted in the home (unsafe_plugin_path), writing nothing through it', () => {
    const elsewhere = join(home, 'elsewhere');
    mkdirSync(elsewhere);
    mkdirSync(join(home, '.krt'));
    symlinkSync(elsewhere, join(home, '.krt', 'plugins'));
    for (const r of [install('ws-plg-1'), runPluginItem(home, { id: 'ws-plg-2', name: 'lint', action: 'remove' })]) {
      assert.equal(r.result, 'failed');
      assert.equal(r.message, 'unsafe_plugin_path: ~/.krt/plugins is not a directory');
    }
    assert.deepEqual(readdirSync(elsewhere), []);
  });

  it('refuses a ~/.krt that is a link planted in the home (unsafe_plugin_path)', () => {
    const elsewhere = join(home, 'elsewhere');
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, join(home, '.krt'));
    const r = install('ws-plg-1');
    assert.deepEqual([r.result, r.message], ['failed', 'unsafe_plugin_path: ~/.krt is not a directory']);
    assert.deepEqual(readdirSync(elsewhere), []);
  });

  it('remove deletes the plugin directory; removing an absent plugin is done', () => {
    install('ws-plg-1');
    assert.deepEqual(runPluginItem(home, { id: 'ws-plg-3', name: 'lint', action: 'remove' }), {
      id: 'ws-plg-3',
      result: 'removed',
    });
    assert.equal(existsSync(dir()), false);
    assert.equal(runPluginItem(home, { id: 'ws-plg-3', name: 'lint', action: 'remove' }).result, 'removed');
    assert.equal(runPluginItem(home, { id: 'ws-plg-4', name: '../x', action: 'remove' }).result, 'failed');
  });

  it('manifestFiles: files are optional', () => {
    assert.deepEqual(manifestFiles('{}'), {});
  });
});
