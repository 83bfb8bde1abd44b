import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  closedObject,
  combinedOutputs,
  combinedResult,
  expandMatrix,
  MatrixError,
  matrixValues,
  MAX_MATRIX_COMBINATIONS,
  resolveStrategy,
  scheduleCombinations,
  type ExpressionContext,
  type JsonValue,
} from './core.ts';

const values = (m: JsonValue): Record<string, JsonValue>[] => matrixValues('build', m);

describe('workflow-core matrix: expansion', () => {
  it('takes the cartesian product of sorted keys, first key outermost', () => {
    assert.deepEqual(values({ os: ['linux', 'mac'], node: [18, 20] }), [
      { node: 18, os: 'linux' },
      { node: 18, os: 'mac' },
      { node: 20, os: 'linux' },
      { node: 20, os: 'mac' },
    ]);
  });

  it('excludes by partial match', () => {
    assert.deepEqual(values({ os: ['linux', 'mac'], node: [18, 20], exclude: [{ os: 'mac', node: 18 }] }), [
      { node: 18, os: 'linux' },
      { node: 20, os: 'linux' },
      { node: 20, os: 'mac' },
    ]);
    assert.deepEqual(values({ os: ['linux', 'mac'], node: [18, 20], exclude: [{ os: 'mac' }] }), [
      { node: 18, os: 'linux' },
      { node: 20, os: 'linux' },
    ]);
  });

  it('applies include like the GitHub documentation example (keys sorted: animal outermost)', () => {
    const m: JsonValue = {
      fruit: ['apple', 'pear'],
      animal: ['cat', 'dog'],
      include: [
        { color: 'green' },
        { color: 'pink', animal: 'cat' },
        { fruit: 'apple', shape: 'circle' },
        { fruit: 'banana' },
        { fruit: 'banana', animal: 'cat' },
      ],
    };
    assert.deepEqual(values(m), [
      { animal: 'cat', color: 'pink', fruit: 'apple', shape: 'circle' },
      { animal: 'cat', color: 'pink', fruit: 'pear' },
      { animal: 'dog', color: 'green', fruit: 'apple', shape: 'circle' },
      { animal: 'dog', color: 'green', fruit: 'pear' },
      { fruit: 'banana' },
      { animal: 'cat', fruit: 'banana' },
    ]);
  });

  it('makes each include its own combination when there are no vectors', () => {
    assert.deepEqual(values({ include: [{ a: 1 }, { a: 2, b: 'x' }] }), [{ a: 1 }, { a: 2, b: 'x' }]);
  });

  it('compares object values deeply in include/exclude', () => {
    const m = { cfg: [{ v: 1 }, { v: 2 }], exclude: [{ cfg: { v: 2 } }], include: [{ cfg: { v: 1 }, extra: true }] };
    assert.deepEqual(values(m), [{ cfg: { v: 1 }, extra: true }]);
  });

  it('rejects malformed matrices with clear messages', () => {
    const bad: [JsonValue, RegExp][] = [
      ['x', /matrix of job "build" must be an object/],
      [{ os: 'linux' }, /matrix key "os" of job "build" must be a list of values/],
      [{ os: [] }, /matrix key "os" of job "build" has no values/],
      [{ os: ['a'], include: 'x' }, /matrix include of job "build" must be a list of objects/],
      [{ os: ['a'], include: [{}] }, /matrix include\[0\] of job "build" must be a non-empty object/],
      [
        { os: ['a'], exclude: [{ arch: 'x' }] },
        /matrix exclude\[0\] of job "build" uses key\(s\) "arch" that are not matrix keys/,
      ],
      [{ os: ['a'], exclude: [{ os: 'a' }] }, /matrix of job "build" produces no combinations/],
      [{}, /produces no combinations/],
    ];
    for (const [m, re] of bad)
      assert.throws(
        () => expandMatrix('build', m),
        (e: unknown) => e instanceof MatrixError && re.test(e.message),
      );
  });

  it('limits the number of combinations', () => {
    const ok = { a: Array.from({ length: 16 }, (_, i) => i), b: Array.from({ length: 16 }, (_, i) => i) };
    assert.equal(expandMatrix('build', ok).length, 256);
    assert.throws(
      () => expandMatrix('build', { ...ok, include: [{ a: 99 }] }),
      /matrix of job "build" expands to 257 combinations, more than the maximum of 256/,
    );
    const huge = Object.fromEntries(
      Array.from({ length: 6 }, (_, i) => [`k${i}`, Array.from({ length: 5 }, (_, j) => j)]),
    );
    assert.throws(
      () => expandMatrix('build', huge),
      /has 15625 combinations before exclude, more than the maximum of 4096/,
    );
    assert.equal(MAX_MATRIX_COMBINATIONS, 256);
  });
});

describe('workflow-core matrix: ids and names', () => {
  it('derives readable ids and GitHub-style names', () => {
    const c = expandMatrix('build', { os: ['ubuntu-latest', 'Mac OS'], node: [18] });
    assert.deepEqual(
      c.map((x) => [x.index, x.id, x.name]),
      [
        [0, '18-ubuntu-latest', 'build (18, ubuntu-latest)'],
        [1, '18-mac-os', 'build (18, Mac OS)'],
      ],
    );
  });

  it('disambiguates colliding slugs with a stable hash suffix', () => {
    const c = expandMatrix('build', { v: ['a.b', 'a-b', 'c'] });
    assert.match(c[0]?.id ?? '', /^a-b-[0-9a-f]{8}$/);
    assert.match(c[1]?.id ?? '', /^a-b-[0-9a-f]{8}$/);
    assert.notEqual(c[0]?.id, c[1]?.id);
    assert.equal(c[2]?.id, 'c');
    assert.deepEqual(expandMatrix('build', { v: ['a.b', 'a-b', 'c'] }), c, 'deterministic');
  });

  it('ids are unique DNS labels for arbitrary matrices', () => {
    const val = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
    );
    const matrix = fc.dictionary(
      fc.constantFrom('os', 'node', 'arch', 'x'),
      fc.uniqueArray(val, { minLength: 1, maxLength: 4, selector: (v) => JSON.stringify(v) }),
      { minKeys: 1, maxKeys: 3 },
    );
    fc.assert(
      fc.property(matrix, (m) => {
        const combos = expandMatrix('job', m);
        const ids = combos.map((c) => c.id);
        assert.equal(new Set(ids).size, ids.length);
        for (const id of ids) assert.match(id, /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
      }),
    );
  });
});

describe('workflow-core matrix: strategy, outputs, scheduling', () => {
  const ctx: ExpressionContext = {
    contexts: {
      needs: closedObject(
        {
          setup: closedObject(
            { outputs: closedObject({ list: '["a","b"]', n: '2' }, 'output'), result: 'success' },
            'property',
          ),
        },
        'job',
      ),
    },
  };

  it('evaluates matrix expressions, fail-fast and max-parallel', () => {
    const s = resolveStrategy(
      'build',
      {
        matrix: { target: '${{ fromJSON(needs.setup.outputs.list) }}', flag: [true] },
        'fail-fast': false,
        'max-parallel': '${{ needs.setup.outputs.n }}',
      },
      ctx,
    );
    assert.deepEqual(
      s?.combinations.map((c) => c.values),
      [
        { flag: true, target: 'a' },
        { flag: true, target: 'b' },
      ],
    );
    assert.equal(s?.failFast, false);
    assert.equal(s?.maxParallel, 2);
    const whole = resolveStrategy('build', { matrix: '${{ fromJSON(\'{"v":[1,2,3]}\') }}' }, ctx);
    assert.equal(whole?.combinations.length, 3);
    assert.equal(whole?.failFast, true);
    assert.equal(resolveStrategy('build', undefined, ctx), undefined);
    assert.throws(
      () => resolveStrategy('build', { matrix: { v: [1] }, 'max-parallel': 0 }, ctx),
      /jobs\.build\.strategy\.max-parallel must be a positive integer, got 0/,
    );
    assert.throws(
      () => resolveStrategy('build', { matrix: { v: [1] }, 'fail-fast': 'maybe' }, ctx),
      /fail-fast must be a boolean/,
    );
  });

  it('keeps every combination output (no last-wins)', () => {
    assert.deepEqual(
      combinedOutputs([
        { id: 'b', outputs: { v: '2', only: 'x' } },
        { id: 'a', outputs: { v: '1' } },
      ]),
      {
        only: '{"b":"x"}',
        v: '{"a":"1","b":"2"}',
      },
    );
    assert.deepEqual(combinedOutputs([{ id: 'a' }]), {});
  });

  it('aggregates combination results', () => {
    assert.equal(combinedResult(['success', 'failure', 'cancelled']), 'failure');
    assert.equal(combinedResult(['success', 'cancelled']), 'cancelled');
    assert.equal(combinedResult(['skipped', 'skipped']), 'skipped');
    assert.equal(combinedResult(['success', 'skipped']), 'success');
    assert.equal(combinedResult(['success', null]), null);
  });

  it('schedules within max-parallel and stops everything on fail-fast', () => {
    const combos = [
      { id: 'a', index: 0, phase: 'Running' as const },
      { id: 'b', index: 1, phase: 'Pending' as const },
      { id: 'c', index: 2, phase: 'Pending' as const },
      { id: 'd', index: 3, phase: 'Succeeded' as const, conclusion: 'success' as const },
    ];
    assert.deepEqual(scheduleCombinations(combos, { failFast: true, maxParallel: 2 }), {
      start: ['b'],
      cancel: [],
      abandon: [],
    });
    assert.deepEqual(scheduleCombinations(combos, { failFast: true }), { start: ['b', 'c'], cancel: [], abandon: [] });
    const failed = [...combos, { id: 'e', index: 4, phase: 'Failed' as const, conclusion: 'failure' as const }];
    assert.deepEqual(scheduleCombinations(failed, { failFast: true }), {
      start: [],
      cancel: ['a'],
      abandon: ['b', 'c'],
    });
    assert.deepEqual(scheduleCombinations(failed, { failFast: false, maxParallel: 2 }), {
      start: ['b'],
      cancel: [],
      abandon: [],
    });
    const tolerated = [
      ...combos,
      { id: 'e', index: 4, phase: 'Failed' as const, outcome: 'failure' as const, conclusion: 'success' as const },
    ];
    assert.deepEqual(
      scheduleCombinations(tolerated, { failFast: true }).abandon,
      [],
      'continue-on-error does not trigger fail-fast',
    );
  });
});
