import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { createHash } from 'node:crypto';
import { expectedDigest, markerCounts, reasonOf, sawEnd, taskScript } from './workload.ts';

describe('soak workload', () => {
  it('finds END in a log stream whose chunks split it', async () => {
    const chunks = (...parts: string[]): Readable => Readable.from(parts.map((p) => Buffer.from(p)));
    assert.equal(await sawEnd(chunks('line 20\nEN', 'D\n')), true);
    assert.equal(await sawEnd(chunks('line 20\n')), false);
  });

  it('counts marker lines per key', () => {
    const m = markerCounts('a 1-2\nb 3-4\na 5-6\nwf-1/write 7-8\n\n');
    assert.deepEqual(
      [...m.entries()],
      [
        ['a', 2],
        ['b', 1],
        ['wf-1/write', 1],
      ],
    );
  });

  it('a task writes its marker first, then the artifact whose digest the soak expects', () => {
    const s = taskScript('task-medium-3', 'task-medium');
    const lines = s.split('\n');
    assert.match(
      lines[0]!,
      /^echo "task-medium-3 \$\$-\$RANDOM \$EPOCHREALTIME \$HOSTNAME \$PWD" >> \/soak-markers\/markers$/,
    );
    assert.ok(lines.includes('sleep 2'));
    assert.ok(s.includes('echo "task-medium-3" > "$KRUNTIME_ARTIFACTS_DIR/out.txt"'));
    assert.equal(expectedDigest('x'), `sha256:${createHash('sha256').update('x\n').digest('hex')}`);
  });
});

describe('soak workload: end reasons', () => {
  it("a Run's reason is its Completed condition's, not another True condition's", () => {
    const run = {
      metadata: { name: 'r' },
      status: {
        phase: 'Failed',
        conditions: [
          { type: 'Assigned', status: 'True', reason: 'Assigned' },
          { type: 'Completed', status: 'True', reason: 'PodGone' },
        ],
      },
    };
    assert.equal(reasonOf(run), 'PodGone');
    assert.equal(
      reasonOf({ metadata: {}, status: { phase: 'Failed', reason: 'BackoffLimitExceeded' } }),
      'BackoffLimitExceeded',
    );
    assert.equal(
      reasonOf({ metadata: {}, status: { conditions: [{ type: 'Assigned', status: 'True', reason: 'Assigned' }] } }),
      undefined,
    );
  });
});
