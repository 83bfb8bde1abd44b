/** Property tests of the expression parser (print/parse round trip) and evaluator invariants. */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { printLiteral, SyntaxProblem, tokenize } from './expr-parser.ts';
import {
  closedObject,
  evaluateExpression,
  ExpressionError,
  FUNCTION_NAMES,
  interpolate,
  looseEquals,
  parseExpression,
  parseTemplate,
  printExpression,
  truthy,
  type BinaryOp,
  type ExprNode,
  type ExpressionContext,
} from './expressions.ts';
import type { JsonValue } from './types.ts';

const OPS: BinaryOp[] = ['||', '&&', '==', '!=', '<', '<=', '>', '>='];

const literal: fc.Arbitrary<ExprNode> = fc.oneof(
  fc.string({ unit: 'grapheme' }).map((value) => ({ kind: 'literal' as const, value, pos: 0 })),
  fc.constantFrom("''", "it's", '}}', '${{', ' a ').map((value) => ({ kind: 'literal' as const, value, pos: 0 })),
  fc.integer({ min: -1e6, max: 1e6 }).map((value) => ({ kind: 'literal' as const, value, pos: 0 })),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => ({ kind: 'literal' as const, value, pos: 0 })),
  fc.constantFrom(true, false, null).map((value) => ({ kind: 'literal' as const, value, pos: 0 })),
);
const contextName = fc.constantFrom('inputs', 'steps', 'needs', 'jobs', 'matrix', 'env', 'github', 'a_b-c');
const propName = fc.stringMatching(/^[A-Za-z0-9_-]{1,8}$/);

const { node: exprArb } = fc.letrec<{ node: ExprNode }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    literal,
    contextName.map((name) => ({ kind: 'context' as const, name, pos: 0 })),
    fc.record({ object: tie('node'), name: propName }).map((r) => ({ kind: 'property' as const, ...r, pos: 0 })),
    fc.record({ object: tie('node'), index: tie('node') }).map((r) => ({ kind: 'index' as const, ...r, pos: 0 })),
    tie('node').map((operand) => ({ kind: 'not' as const, operand, pos: 0 })),
    fc
      .record({ op: fc.constantFrom(...OPS), left: tie('node'), right: tie('node') })
      .map((r) => ({ kind: 'binary' as const, ...r, pos: 0 })),
    fc
      .record({ name: fc.constantFrom(...FUNCTION_NAMES, 'custom'), args: fc.array(tie('node'), { maxLength: 3 }) })
      .map((r) => ({ kind: 'call' as const, ...r, pos: 0 })),
  ),
}));

/** The AST without source positions. */
function strip(n: ExprNode): unknown {
  return JSON.parse(JSON.stringify(n, (k, v: unknown) => (k === 'pos' ? undefined : Object.is(v, -0) ? '-0' : v)));
}

describe('workflow-core expressions (properties)', () => {
  it('parse(print(ast)) is ast and printing is a fixed point', () => {
    fc.assert(
      fc.property(exprArb, (ast) => {
        const text = printExpression(ast);
        const parsed = parseExpression(text);
        assert.deepEqual(strip(parsed), strip(ast), text);
        assert.equal(printExpression(parsed), text);
      }),
      { numRuns: 400 },
    );
  });

  it('round-trips through ${{ }} templates with surrounding text', () => {
    fc.assert(
      fc.property(
        exprArb,
        fc.string().filter((s) => !s.includes('${{')),
        (ast, text) => {
          const segs = parseTemplate(`${text}\${{ ${printExpression(ast)} }}${text}`, 'f');
          const expr = segs.find((s) => s.kind === 'expr');
          assert.ok(expr && expr.kind === 'expr');
          assert.deepEqual(strip(expr.ast), strip(ast));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('tokenizer and template parser only ever throw their typed errors', () => {
    const chars = fc.constantFrom(...'ab1 .[]()\'"!=<>&|,{}$*-_x0'.split(''));
    fc.assert(
      fc.property(
        fc.array(chars, { maxLength: 30 }).map((a) => a.join('')),
        (src) => {
          try {
            tokenize(src);
            parseExpression(src);
          } catch (e) {
            assert.ok(e instanceof SyntaxProblem, String(e));
          }
          try {
            parseTemplate(`\${{ ${src} }}`, 'f');
          } catch (e) {
            assert.ok(e instanceof ExpressionError, String(e));
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

// ---------------------------------------------------------------------------------------
// Evaluator invariants over JSON values written as literals or fromJSON('...')

const jsonValue: fc.Arbitrary<JsonValue> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.oneof(
      fc.string({ maxLength: 6 }),
      fc.constantFrom('', '0', '1', 'true', 'ABC', 'abc', ' 2 ', '0x1f'),
    ),
  },
  {
    weight: 5,
    arbitrary: fc.oneof(
      fc.integer({ min: -5, max: 5 }),
      fc.double({ noNaN: true, noDefaultInfinity: true, min: -10, max: 10 }),
    ),
  },
  { weight: 3, arbitrary: fc.constantFrom(true, false, null) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<JsonValue> },
);

function source(v: JsonValue): string {
  if (v === null || typeof v !== 'object') return typeof v === 'number' && Object.is(v, -0) ? '0' : printLiteral(v);
  return `fromJSON(${printLiteral(JSON.stringify(v))})`;
}

const empty: ExpressionContext = { contexts: { matrix: closedObject({}, 'matrix key') } };
const ev = (src: string): JsonValue => evaluateExpression(src, empty, 'f');

describe('workflow-core expression evaluator (properties)', () => {
  it('&& and || return one of their operands, chosen by truthiness', () => {
    fc.assert(
      fc.property(jsonValue, jsonValue, (a, b) => {
        const va = ev(source(a));
        const vb = ev(source(b));
        assert.deepEqual(ev(`${source(a)} || ${source(b)}`), truthy(va) ? va : vb);
        assert.deepEqual(ev(`${source(a)} && ${source(b)}`), truthy(va) ? vb : va);
        assert.equal(ev(`!!${source(a)}`), truthy(va));
        assert.equal(ev(`!(${source(a)} && ${source(b)}) == (!${source(a)} || !${source(b)})`), true, 'De Morgan');
      }),
      { numRuns: 300 },
    );
  });

  it('== is symmetric, != is its negation, and primitives equal themselves unless NaN', () => {
    fc.assert(
      fc.property(jsonValue, jsonValue, (a, b) => {
        const ab = ev(`${source(a)} == ${source(b)}`);
        assert.equal(ab, ev(`${source(b)} == ${source(a)}`));
        assert.equal(ev(`${source(a)} != ${source(b)}`), !ab);
        if (a === null || typeof a !== 'object') assert.equal(ev(`${source(a)} == ${source(a)}`), looseEquals(a, a));
      }),
      { numRuns: 300 },
    );
  });

  it('orders numbers like JavaScript and is consistent between < and >=', () => {
    fc.assert(
      fc.property(fc.integer({ min: -1000, max: 1000 }), fc.integer({ min: -1000, max: 1000 }), (a, b) => {
        assert.equal(ev(`${a} < ${b}`), a < b);
        assert.equal(ev(`${a} >= ${b}`), a >= b);
        assert.equal(ev(`'${a}' <= ${b}`), a <= b);
        const lt = ev(`${a} < ${b}`) === true;
        const eq = ev(`${a} == ${b}`) === true;
        const gt = ev(`${a} > ${b}`) === true;
        assert.equal([lt, eq, gt].filter(Boolean).length, 1, 'trichotomy');
      }),
    );
  });

  it('compares ASCII strings case-insensitively', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme-ascii', maxLength: 8 }),
        fc.string({ unit: 'grapheme-ascii', maxLength: 8 }),
        (s, t) => {
          assert.equal(ev(`${printLiteral(s)} == ${printLiteral(s.toUpperCase())}`), true);
          assert.equal(ev(`${printLiteral(s.toLowerCase())} != ${printLiteral(s)}`), false);
          assert.equal(ev(`${printLiteral(s)} == ${printLiteral(t)}`), s.toLowerCase() === t.toLowerCase());
        },
      ),
    );
  });

  it('string literals, format and interpolation preserve any text', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        assert.equal(ev(printLiteral(s)), s);
        assert.equal(ev(`format('{0}', ${printLiteral(s)})`), s);
        assert.equal(interpolate(`<\${{ ${printLiteral(s)} }}>`, empty, 'f'), `<${s}>`);
        if (!s.includes('${{')) assert.equal(interpolate(s, empty, 'f'), s);
      }),
      { numRuns: 300 },
    );
  });

  it('fromJSON(toJSON(v)) is v', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), (v) => {
        const clean = JSON.parse(JSON.stringify(v)) as JsonValue;
        assert.deepEqual(ev(`fromJSON(toJSON(${source(clean)}))`), clean);
      }),
      { numRuns: 200 },
    );
  });
});
