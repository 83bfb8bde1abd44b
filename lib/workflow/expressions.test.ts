import assert from 'node:assert/strict';
import {
  checkCondition,
  checkTemplate,
  closedObject,
  collectReferences,
  evaluateCondition,
  evaluateExpression,
  evaluateTemplate,
  ExpressionError,
  interpolate,
  parseCondition,
  parseExpression,
  parseTemplate,
  printExpression,
  type ExpressionContext,
} from './expressions.ts';
import type { JsonValue } from './types.ts';

const ctx: ExpressionContext = {
  contexts: {
    inputs: closedObject({ name: 'World', count: '3', empty: '' }, 'input'),
    steps: closedObject(
      {
        build: closedObject(
          {
            outcome: 'success',
            conclusion: 'success',
            outputs: closedObject({ version: '1.2.3', flag: 'true' }, 'output'),
          },
          'property',
        ),
        'build.linux': closedObject(
          { outcome: 'failure', conclusion: 'success', outputs: closedObject({}, 'output') },
          'property',
        ),
      },
      'step',
    ),
    needs: closedObject(
      {
        setup: closedObject(
          { result: 'success', outputs: closedObject({ list: '["a","b"]', obj: '{"k":{"n":1}}' }, 'output') },
          'property',
        ),
      },
      'job',
    ),
    matrix: closedObject({ os: 'linux', node: 18, experimental: false }, 'matrix key'),
    env: closedObject({ HOME: '/root' }, 'environment variable'),
  },
};

const ev = (src: string, c: ExpressionContext = ctx): JsonValue => evaluateExpression(src, c, 'f');

function throwsExpr(fn: () => unknown, code: string, detail?: RegExp): ExpressionError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof ExpressionError, `expected ExpressionError, got ${String(caught)}`);
  assert.equal(caught.code, code, caught.message);
  if (detail) assert.match(caught.message, detail);
  return caught;
}

describe('workflow-core expressions: literals and operators', () => {
  it('evaluates literals', () => {
    assert.equal(ev("'it''s'"), "it's");
    assert.equal(ev('null'), null);
    assert.equal(ev('true'), true);
    assert.equal(ev('false'), false);
    assert.equal(ev('42'), 42);
    assert.equal(ev('-9.5'), -9.5);
    assert.equal(ev('2.99e-2'), 0.0299);
    assert.equal(ev('0xff'), 255);
    assert.equal(ev("''"), '');
  });

  it('returns operand values from && and || (GitHub semantics)', () => {
    assert.equal(ev("'a' && 'b'"), 'b');
    assert.equal(ev("'' && 'b'"), '');
    assert.equal(ev("null || 'fallback'"), 'fallback');
    assert.equal(ev("'x' || 'y'"), 'x');
    assert.equal(ev('0 || false'), false);
    assert.equal(ev("inputs.empty || 'default'"), 'default');
    assert.equal(ev("matrix.node && 'yes'"), 'yes');
  });

  it('short-circuits: the unevaluated side may be erroneous', () => {
    assert.equal(ev("false && fromJSON('nope')"), false);
    assert.equal(ev("true || fromJSON('nope')"), true);
  });

  it('implements falsy values: false, 0, -0, NaN, empty string, null', () => {
    for (const f of ['false', '0', '-0', "''", 'null', "fromJSON('0')"]) assert.equal(ev(`!${f}`), true, f);
    for (const t of ["'0'", "'false'", '1', "fromJSON('[]')", "fromJSON('{}')", "' '"])
      assert.equal(ev(`!${t}`), false, t);
  });

  it('uses loose equality with number coercion and case-insensitive strings', () => {
    assert.equal(ev("'ABC' == 'abc'"), true);
    assert.equal(ev("1 == '1'"), true);
    assert.equal(ev("'1.0' == 1"), true);
    assert.equal(ev("'0x10' == 16"), true);
    assert.equal(ev("' 12 ' == 12"), true);
    assert.equal(ev("null == ''"), true);
    assert.equal(ev('null == 0'), true);
    assert.equal(ev('null == false'), true);
    assert.equal(ev("'' == false"), true);
    assert.equal(ev("'true' == true"), false);
    assert.equal(ev("'abc' == 0"), false);
    assert.equal(ev('true == 1'), true);
    assert.equal(ev("fromJSON('[]') == fromJSON('[]')"), false);
    assert.equal(ev('steps.build == steps.build'), true);
    assert.equal(ev("'a' != 'A'"), false);
    assert.equal(ev("'abc' != 0"), true);
  });

  it('orders numbers, strings (case-insensitive) and coerced values', () => {
    assert.equal(ev('1 < 2'), true);
    assert.equal(ev("'a' < 'B'"), true);
    assert.equal(ev("'b' <= 'B'"), true);
    assert.equal(ev("'10' > 9"), true);
    assert.equal(ev("'10' > '9'"), false, 'two strings compare as strings');
    assert.equal(ev('null < 1'), true);
    assert.equal(ev("'abc' < 1"), false);
    assert.equal(ev("'abc' >= 1"), false);
    assert.equal(ev("fromJSON('{}') < 1"), false);
    assert.equal(ev('true > false'), true);
  });

  it('gives ! higher precedence than comparison and && higher than ||', () => {
    assert.equal(ev('!0 == true'), true);
    assert.equal(ev('true || false && false'), true);
    assert.equal(ev('(true || false) && false'), false);
    assert.equal(ev('1 < 2 == true'), true);
    assert.equal(printExpression(parseExpression('a || b && c == d < e')), 'a || b && c == d < e');
    assert.equal(printExpression(parseExpression('(a || b) && !(c == d)')), '(a || b) && !(c == d)');
  });
});

describe('workflow-core expressions: contexts and properties', () => {
  it('reads step, needs, matrix, inputs and env contexts', () => {
    assert.equal(ev('steps.build.outputs.version'), '1.2.3');
    assert.equal(ev("steps['build.linux'].outcome"), 'failure');
    assert.equal(ev('steps.build.conclusion'), 'success');
    assert.equal(ev('needs.setup.result'), 'success');
    assert.equal(ev('matrix.node'), 18);
    assert.equal(ev("inputs['name']"), 'World');
    assert.equal(ev('env.HOME'), '/root');
  });

  it('looks keys up case-insensitively when the exact key is absent', () => {
    assert.equal(ev('STEPS.Build.OUTPUTS.Version'), '1.2.3');
    assert.equal(ev('env.home'), '/root');
  });

  it('rejects unknown keys of closed context objects, naming what exists', () => {
    throwsExpr(
      () => ev('steps.bild.outputs.version'),
      'unknown-property',
      /steps has no step "bild" \(available: build, build\.linux\)/,
    );
    throwsExpr(
      () => ev('steps.build.outputs.missing'),
      'unknown-property',
      /steps\.build\.outputs has no output "missing" \(available: flag, version\)/,
    );
    throwsExpr(() => ev('needs.deploy.result'), 'unknown-property', /needs has no job "deploy"/);
    throwsExpr(() => ev('matrix.arch'), 'unknown-property', /matrix has no matrix key "arch"/);
    throwsExpr(() => ev("steps['build.linux'].outputs.x"), 'unknown-property', /none available/);
  });

  it('returns null for missing keys of open objects (fromJSON) and for access on null', () => {
    assert.equal(ev('fromJSON(needs.setup.outputs.obj).k.n'), 1);
    assert.equal(ev('fromJSON(needs.setup.outputs.obj).missing'), null);
    assert.equal(ev('fromJSON(needs.setup.outputs.obj).missing.deeper'), null);
    assert.equal(ev('fromJSON(needs.setup.outputs.list)[1]'), 'b');
    assert.equal(ev('fromJSON(needs.setup.outputs.list)[5]'), null);
    assert.equal(ev('fromJSON(needs.setup.outputs.list)[0.5]'), null);
    assert.equal(ev("fromJSON(needs.setup.outputs.obj)['k']['n']"), 1);
  });

  it('rejects property reads of strings/numbers and string indexes of arrays', () => {
    throwsExpr(
      () => ev('steps.build.outputs.version.major'),
      'type',
      /cannot read property "major" of string value steps\.build\.outputs\.version/,
    );
    throwsExpr(() => ev("fromJSON(needs.setup.outputs.list)['0']"), 'type', /can only be indexed by a number/);
    throwsExpr(() => ev("matrix[fromJSON('{}')]"), 'type', /property name/);
  });

  it('rejects unknown and unavailable contexts', () => {
    throwsExpr(
      () => ev('github.sha'),
      'unknown-context',
      /unknown context "github" \(available here: env, inputs, matrix, needs, steps\)/,
    );
    throwsExpr(() => ev('jobs.build.outputs.x'), 'unavailable-context', /context "jobs" is not available here/);
    throwsExpr(() => evaluateExpression('steps.x', { contexts: {} }, 'f'), 'unavailable-context', /available: none/);
  });
});

describe('workflow-core expressions: functions', () => {
  it('contains / startsWith / endsWith are case-insensitive; contains searches arrays', () => {
    assert.equal(ev("contains('Hello World', 'WORLD')"), true);
    assert.equal(ev("contains(fromJSON(needs.setup.outputs.list), 'A')"), true);
    assert.equal(ev("contains(fromJSON('[1,2]'), '2')"), true);
    assert.equal(ev("contains(fromJSON('[1,2]'), 3)"), false);
    assert.equal(ev("startsWith('refs/heads/main', 'REFS/')"), true);
    assert.equal(ev("endsWith('archive.TGZ', '.tgz')"), true);
    assert.equal(ev('contains(123, 2)'), true);
    assert.equal(ev("contains(null, '')"), true);
  });

  it('format replaces {N} and keeps {{ }} escapes', () => {
    assert.equal(ev("format('Hello {0} {1} {0}', 'a', 1)"), 'Hello a 1 a');
    assert.equal(ev("format('{{0}} {0}', true)"), '{0} true');
    assert.equal(ev("format('plain')"), 'plain');
    throwsExpr(() => ev("format('{1}', 'a')"), 'format', /references argument \{1\} but only 1 argument/);
    throwsExpr(() => ev("format('{0', 'a')"), 'format', /invalid placeholder/);
    throwsExpr(() => ev("format('}', 'a')"), 'format', /unmatched '\}'/);
    throwsExpr(() => ev("format('{x}', 'a')"), 'format', /invalid placeholder/);
  });

  it('join, toJSON and fromJSON', () => {
    assert.equal(ev('join(fromJSON(\'["a",1,true,null]\'))'), 'a,1,true,');
    assert.equal(ev('join(fromJSON(\'["a","b"]\'), \' | \')'), 'a | b');
    assert.equal(ev("join('solo', '-')"), 'solo');
    assert.equal(ev('toJSON(matrix)'), '{\n  "os": "linux",\n  "node": 18,\n  "experimental": false\n}');
    assert.equal(ev("toJSON('x')"), '"x"');
    assert.deepEqual(ev('fromJSON(\'{"a":[1,2]}\')'), { a: [1, 2] });
    assert.equal(ev("fromJSON('true')"), true);
    throwsExpr(() => ev("fromJSON('{bad')"), 'json', /fromJSON\(\): invalid JSON "\{bad"/);
    throwsExpr(() => ev("join(fromJSON('[[1]]'))"), 'type', /element 0 of the array passed to join\(\) is an array/);
  });

  it('accepts function names case-insensitively', () => {
    assert.equal(ev("TOJSON('x')"), '"x"');
    assert.equal(ev("fromJson('1')"), 1);
  });

  it('rejects unknown functions and wrong arity', () => {
    throwsExpr(() => ev("hashFiles('**/x')"), 'unknown-function', /unknown function "hashFiles"/);
    throwsExpr(() => ev("contains('a')"), 'arity', /contains\(\) takes 2 argument\(s\), got 1/);
    throwsExpr(() => ev('format()'), 'arity', /format\(\) takes at least 1 argument/);
    throwsExpr(() => ev("join('a', 'b', 'c')"), 'arity', /join\(\) takes 1 to 2 argument/);
    throwsExpr(() => ev('always(1)'), 'arity', /always\(\) takes 0/);
  });

  it('allows status functions only in conditions', () => {
    throwsExpr(() => ev('success()'), 'status-function', /success\(\) is only available in if: conditions/);
    throwsExpr(
      () => interpolate('${{ always() }}', ctx, 'jobs.a.steps[0].run'),
      'status-function',
      /jobs\.a\.steps\[0\]\.run/,
    );
  });
});

describe('workflow-core expressions: templates', () => {
  it('interpolates several expressions and keeps literal text', () => {
    assert.equal(
      interpolate('v=${{ steps.build.outputs.version }} on ${{matrix.os}}/${{ matrix.node }}!', ctx, 'f'),
      'v=1.2.3 on linux/18!',
    );
    assert.equal(interpolate('no expressions', ctx, 'f'), 'no expressions');
    assert.equal(interpolate('${{ null }}|${{ true }}|${{ 1.50 }}', ctx, 'f'), '|true|1.5');
    assert.equal(interpolate("${{ format('}}{0}', 'x') }}", ctx, 'f'), '}x');
  });

  it('rejects objects and arrays in string interpolation', () => {
    throwsExpr(() => interpolate('${{ fromJSON(needs.setup.outputs.list) }}', ctx, 'f'), 'type', /use toJSON\(\)/);
    assert.equal(interpolate("${{ toJSON(fromJSON('[1]')) }}", ctx, 'f'), '[\n  1\n]');
  });

  it('returns typed values for a field that is exactly one expression', () => {
    assert.deepEqual(evaluateTemplate("${{ fromJSON('[1,2]') }}", ctx, 'f'), [1, 2]);
    assert.equal(evaluateTemplate('${{ matrix.experimental }}', ctx, 'f'), false);
    assert.equal(evaluateTemplate(' ${{ matrix.experimental }}', ctx, 'f'), ' false');
  });

  it('reports syntax errors with the field, expression and position', () => {
    const e = throwsExpr(
      () => interpolate('echo ${{ steps.build.outputs.version = 1 }}', ctx, 'jobs.build.steps[1].run'),
      'syntax',
    );
    assert.equal(e.field, 'jobs.build.steps[1].run');
    assert.equal(e.expression, 'steps.build.outputs.version = 1');
    assert.equal(e.position, 28);
    assert.equal(e.offset, 9 + 28);
    assert.equal(
      e.message,
      "jobs.build.steps[1].run: unexpected character '=' (did you mean '=='?) (in \"steps.build.outputs.version = 1\" at column 29)",
    );
  });

  it('reports many kinds of syntax errors', () => {
    const cases: [string, RegExp][] = [
      ['${{ }}', /empty expression/],
      ['${{ a', /unterminated '\$\{\{'/],
      ["${{ 'abc }}", /unterminated '\$\{\{'/],
      ['${{ (a }}', /expected '\)' to close the group/],
      ['${{ a[1 }}', /expected '\]' to close the index/],
      ['${{ f(1, }}', /unexpected end of expression/],
      ['${{ a b }}', /unexpected 'b' after the end/],
      ['${{ a.* }}', /object filters/],
      ['${{ a. }}', /expected a property name/],
      ['${{ "x" }}', /strings use single quotes/],
      ['${{ 1abc }}', /invalid number literal "1abc"/],
      ['${{ 1.2.3 }}', /invalid number literal/],
      ['${{ 1e999 }}', /out of range/],
      ['${{ a && }}', /unexpected end of expression/],
      ['${{ a.b() }}', /unexpected '\('/],
      ['${{ a & b }}', /did you mean '&&'/],
    ];
    for (const [text, re] of cases) throwsExpr(() => parseTemplate(text, 'f'), 'syntax', re);
  });

  it('parses deep nesting until the limit', () => {
    assert.equal(ev('('.repeat(50) + '1' + ')'.repeat(50)), 1);
    throwsExpr(() => ev('('.repeat(150) + '1' + ')'.repeat(150)), 'syntax', /nesting exceeds 100/);
  });
});

describe('workflow-core expressions: conditions', () => {
  const ok = { success: true, failure: false, cancelled: false };
  const failed = { success: false, failure: true, cancelled: false };
  const cancelled = { success: false, failure: false, cancelled: true };
  const cond = (text: string | undefined, status = ok): boolean =>
    evaluateCondition(text, { ...ctx, status }, 'jobs.a.if');

  it('defaults to success()', () => {
    assert.equal(cond(undefined), true);
    assert.equal(cond(''), true);
    assert.equal(cond(undefined, failed), false);
    assert.equal(cond(undefined, cancelled), false);
  });

  it('wraps conditions without status functions in success() &&', () => {
    assert.equal(cond("matrix.os == 'linux'"), true);
    assert.equal(cond("matrix.os == 'linux'", failed), false);
    assert.equal(parseCondition("matrix.os == 'linux'", 'f').implicitSuccess, true);
    assert.equal(parseCondition('failure()', 'f').implicitSuccess, false);
  });

  it('evaluates status functions', () => {
    assert.equal(cond('always()', failed), true);
    assert.equal(cond('always()', cancelled), true);
    assert.equal(cond('failure()', failed), true);
    assert.equal(cond('failure()', ok), false);
    assert.equal(cond('failure()', { success: false, failure: true, cancelled: true }), false);
    assert.equal(cond('cancelled()', cancelled), true);
    assert.equal(cond('!cancelled()', failed), true);
    assert.equal(cond("${{ failure() && steps.build.outcome == 'success' }}", failed), true);
  });

  it('accepts ${{ }} around the whole condition only', () => {
    assert.equal(cond('  ${{ matrix.node > 16 }}  '), true);
    throwsExpr(() => cond("${{ matrix.os }} == 'linux'"), 'syntax', /always true/);
    throwsExpr(() => cond('${{ true }}${{ false }}'), 'syntax', /single expression/);
  });

  it('uses truthiness of non-boolean results', () => {
    assert.equal(cond('inputs.empty'), false);
    assert.equal(cond('inputs.name'), true);
  });
});

describe('workflow-core expressions: static checks and references', () => {
  it('checkTemplate validates contexts and functions without evaluating', () => {
    assert.equal(
      checkTemplate('${{ needs.a.outputs.x }} ${{ inputs.y }}', 'f', { contexts: ['needs', 'inputs'] }).length,
      2,
    );
    throwsExpr(() => checkTemplate('${{ steps.a.outputs.x }}', 'f', { contexts: ['needs'] }), 'unavailable-context');
    throwsExpr(() => checkTemplate('${{ foo }}', 'f', { contexts: ['needs'] }), 'unknown-context');
    throwsExpr(() => checkTemplate('${{ nope() }}', 'f', { contexts: [] }), 'unknown-function');
    throwsExpr(() => checkTemplate('${{ success() }}', 'f', { contexts: [] }), 'status-function');
    assert.equal(checkCondition("failure() || needs.a.result == 'skipped'", 'f', ['needs']).implicitSuccess, false);
  });

  it('collects literal reference paths', () => {
    const refs = collectReferences(
      parseExpression("needs.build.outputs['v'] == steps[matrix.os].outputs.x && contains(jobs.a.outputs.y, inputs.z)"),
    );
    assert.deepEqual(
      refs.map((r) => [r.context, r.path]),
      [
        ['needs', ['build', 'outputs', 'v']],
        ['matrix', ['os']],
        ['steps', []],
        ['jobs', ['a', 'outputs', 'y']],
        ['inputs', ['z']],
      ],
    );
  });
});
