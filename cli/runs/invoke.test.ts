import assert from 'node:assert/strict';
import { defaultInlinePath, runFromFlags } from './commands.ts';
import { payloadOf } from './invoke.ts';

describe('krt invoke and krt run --function (issue 15)', () => {
  it('reads the payload from -d or -f and refuses bad JSON', () => {
    assert.deepEqual(
      payloadOf({ data: '{"a":1}' }, () => ''),
      { a: 1 },
    );
    assert.deepEqual(
      payloadOf({ file: 'p.json' }, (f) => (f === 'p.json' ? '[1]' : '')),
      [1],
    );
    assert.equal(
      payloadOf({}, () => ''),
      null,
    );
    assert.throws(() => payloadOf({ data: '{' }, () => ''), /not JSON/);
    assert.throws(() => payloadOf({ data: '1', file: 'x' }, () => ''), /either/);
  });

  it('builds a function Run with the handler, idle timeout and an inline path from the handler', () => {
    const run = runFromFlags(
      { runtime: 'py', function: true, handler: 'pkg.mod.handle', inline: 'x', idleTimeout: '30' },
      [],
    ) as { spec: { mode: unknown; source: { inlinePath: string } } };
    assert.deepEqual(run.spec.mode, { function: { handler: 'pkg.mod.handle', idleTimeoutSeconds: 30 } });
    assert.equal(run.spec.source.inlinePath, 'pkg/mod.py');
    assert.equal(defaultInlinePath('handler.greet', undefined), 'handler.sh');
    assert.equal(defaultInlinePath('handler.greet', 'h.sh'), 'handler.sh');
    assert.throws(() => runFromFlags({ runtime: 'r', function: true }, []), /--handler/);
  });
});
