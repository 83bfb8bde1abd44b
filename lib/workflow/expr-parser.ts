/**
 * Lexer, parser and printer of the GitHub Actions expression language subset used inside
 * `${{ }}` (see expressions.ts for evaluation). Grammar, lowest precedence first:
 *
 *   expr    := or
 *   or      := and ( '||' and )*
 *   and     := eq ( '&&' eq )*
 *   eq      := cmp ( ( '==' | '!=' ) cmp )*
 *   cmp     := unary ( ( '<' | '<=' | '>' | '>=' ) unary )*
 *   unary   := '!' unary | postfix
 *   postfix := primary ( '.' NAME | '[' expr ']' )*
 *   primary := literal | IDENT | IDENT '(' [ expr ( ',' expr )* ] ')' | '(' expr ')'
 *
 * Literals: 'string' ('' escapes a quote), numbers (JSON-style with optional leading '-',
 * exponent, or 0x hex), true, false, null. Identifiers are [A-Za-z_][A-Za-z0-9_-]*. A property
 * NAME after '.' is [A-Za-z0-9_-]+ (kruntimes step and job names may start with a digit);
 * names with other characters (e.g. '.') need the index form steps['build.linux'].
 */

export type BinaryOp = '||' | '&&' | '==' | '!=' | '<' | '<=' | '>' | '>=';

export type ExprNode =
  | { kind: 'literal'; value: null | boolean | number | string; pos: number }
  | { kind: 'context'; name: string; pos: number }
  | { kind: 'property'; object: ExprNode; name: string; pos: number }
  | { kind: 'index'; object: ExprNode; index: ExprNode; pos: number }
  | { kind: 'not'; operand: ExprNode; pos: number }
  | { kind: 'binary'; op: BinaryOp; left: ExprNode; right: ExprNode; pos: number }
  | { kind: 'call'; name: string; args: ExprNode[]; pos: number };

/** A syntax problem at `pos` (offset in the expression text); expressions.ts wraps it. */
export class SyntaxProblem extends Error {
  constructor(
    readonly detail: string,
    readonly pos: number,
  ) {
    super(detail);
    this.name = 'SyntaxProblem';
  }
}

type TokenKind = 'punct' | 'string' | 'number' | 'ident' | 'name' | 'eof';
interface Token {
  kind: TokenKind;
  text: string;
  value?: string | number;
  pos: number;
}

const PUNCT = ['==', '!=', '<=', '>=', '&&', '||', '(', ')', '[', ']', '.', ',', '!', '<', '>'];
const IDENT_START = /[A-Za-z_]/;
const IDENT = /[A-Za-z_][A-Za-z0-9_-]*/y;
const NAME = /[A-Za-z0-9_-]+/y;
const NUMBER = /-?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/y;
const NUMBER_TAIL = /[A-Za-z0-9_.]/;

function lexString(src: string, start: number): Token {
  let i = start + 1;
  let value = '';
  for (;;) {
    if (i >= src.length) throw new SyntaxProblem('unterminated string literal', start);
    const c = src[i] ?? '';
    if (c === "'") {
      if (src[i + 1] !== "'") break;
      value += "'";
      i += 2;
      continue;
    }
    value += c;
    i++;
  }
  return { kind: 'string', text: src.slice(start, i + 1), value, pos: start };
}

function lexNumber(src: string, start: number): Token {
  NUMBER.lastIndex = start;
  const m = NUMBER.exec(src);
  const text = m?.[0] ?? '';
  const next = src[start + text.length] ?? '';
  if (!m || text === '-' || NUMBER_TAIL.test(next))
    throw new SyntaxProblem(`invalid number literal "${src.slice(start).split(/[\s),\]]/)[0] ?? ''}"`, start);
  const neg = text.startsWith('-');
  const body = neg ? text.slice(1) : text;
  const magnitude = /^0[xX]/.test(body) ? parseInt(body.slice(2), 16) : Number(body);
  if (!Number.isFinite(magnitude)) throw new SyntaxProblem(`number literal ${text} is out of range`, start);
  return { kind: 'number', text, value: neg ? -magnitude : magnitude, pos: start };
}

function lexName(src: string, start: number): Token {
  NAME.lastIndex = start;
  const m = NAME.exec(src);
  if (m) return { kind: 'name', text: m[0], pos: start };
  if (src[start] === '*') throw new SyntaxProblem('object filters (.*) are not supported', start);
  throw new SyntaxProblem("expected a property name after '.'", start);
}

function lexPunct(src: string, i: number): Token {
  const c = src[i] ?? '';
  const p = PUNCT.find((x) => src.startsWith(x, i));
  if (p) return { kind: 'punct', text: p, pos: i };
  const hints: Record<string, string> = {
    '=': " (did you mean '=='?)",
    '&': " (did you mean '&&'?)",
    '|': " (did you mean '||'?)",
    '"': ' (strings use single quotes)',
  };
  throw new SyntaxProblem(`unexpected character '${c}'${hints[c] ?? ''}`, i);
}

/** Splits an expression into tokens (ending with an eof token). */
export function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] ?? '';
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const prev = out[out.length - 1];
    let tok: Token;
    if (prev?.kind === 'punct' && prev.text === '.') tok = lexName(src, i);
    else if (c === "'") tok = lexString(src, i);
    else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(src[i + 1] ?? ''))) tok = lexNumber(src, i);
    else if (IDENT_START.test(c)) {
      IDENT.lastIndex = i;
      tok = { kind: 'ident', text: IDENT.exec(src)?.[0] ?? c, pos: i };
    } else tok = lexPunct(src, i);
    out.push(tok);
    i = tok.pos + tok.text.length;
  }
  out.push({ kind: 'eof', text: '', pos: src.length });
  return out;
}

const LEVELS: BinaryOp[][] = [['||'], ['&&'], ['==', '!='], ['<', '<=', '>', '>=']];
const MAX_DEPTH = 100;

class Parser {
  private i = 0;
  private depth = 0;
  constructor(private readonly toks: Token[]) {}

  private peek(): Token {
    return this.toks[this.i] ?? { kind: 'eof', text: '', pos: 0 };
  }
  private next(): Token {
    const t = this.peek();
    this.i++;
    return t;
  }
  private isPunct(text: string): boolean {
    const t = this.peek();
    return t.kind === 'punct' && t.text === text;
  }
  private expect(text: string, what: string): Token {
    const t = this.peek();
    if (t.kind !== 'punct' || t.text !== text)
      throw new SyntaxProblem(`expected '${text}' ${what}, found ${describe(t)}`, t.pos);
    return this.next();
  }

  parseAll(): ExprNode {
    if (this.peek().kind === 'eof') throw new SyntaxProblem('empty expression', 0);
    const node = this.binary(0);
    const t = this.peek();
    if (t.kind !== 'eof') throw new SyntaxProblem(`unexpected ${describe(t)} after the end of the expression`, t.pos);
    return node;
  }

  private binary(level: number): ExprNode {
    const ops = LEVELS[level];
    if (!ops) return this.unary();
    let left = this.binary(level + 1);
    for (;;) {
      const t = this.peek();
      const op = ops.find((o) => t.kind === 'punct' && t.text === o);
      if (!op) return left;
      this.next();
      const right = this.binary(level + 1);
      left = { kind: 'binary', op, left, right, pos: t.pos };
    }
  }

  private unary(): ExprNode {
    if (this.isPunct('!')) {
      const t = this.next();
      return { kind: 'not', operand: this.nested(() => this.unary()), pos: t.pos };
    }
    return this.postfix();
  }

  private nested(fn: () => ExprNode): ExprNode {
    if (++this.depth > MAX_DEPTH)
      throw new SyntaxProblem(`expression nesting exceeds ${MAX_DEPTH} levels`, this.peek().pos);
    try {
      return fn();
    } finally {
      this.depth--;
    }
  }

  private postfix(): ExprNode {
    let node = this.primary();
    for (;;) {
      if (this.isPunct('.')) {
        this.next();
        const name = this.next();
        if (name.kind !== 'name') throw new SyntaxProblem("expected a property name after '.'", name.pos);
        node = { kind: 'property', object: node, name: name.text, pos: name.pos };
      } else if (this.isPunct('[')) {
        const t = this.next();
        const index = this.nested(() => this.binary(0));
        this.expect(']', 'to close the index');
        node = { kind: 'index', object: node, index, pos: t.pos };
      } else return node;
    }
  }

  private primary(): ExprNode {
    const t = this.next();
    if (t.kind === 'string' || t.kind === 'number') return { kind: 'literal', value: t.value ?? null, pos: t.pos };
    if (t.kind === 'ident') return this.identifier(t);
    if (t.kind === 'punct' && t.text === '(') {
      const inner = this.nested(() => this.binary(0));
      this.expect(')', 'to close the group');
      return inner;
    }
    throw new SyntaxProblem(`unexpected ${describe(t)}`, t.pos);
  }

  private identifier(t: Token): ExprNode {
    if (t.text === 'true' || t.text === 'false') return { kind: 'literal', value: t.text === 'true', pos: t.pos };
    if (t.text === 'null') return { kind: 'literal', value: null, pos: t.pos };
    if (!this.isPunct('(')) return { kind: 'context', name: t.text, pos: t.pos };
    this.next();
    const args: ExprNode[] = [];
    if (!this.isPunct(')')) {
      for (;;) {
        args.push(this.nested(() => this.binary(0)));
        if (!this.isPunct(',')) break;
        this.next();
      }
    }
    this.expect(')', `to close the arguments of ${t.text}()`);
    return { kind: 'call', name: t.text, args, pos: t.pos };
  }
}

function describe(t: Token): string {
  if (t.kind === 'eof') return 'end of expression';
  if (t.kind === 'string') return `string ${t.text}`;
  return `'${t.text}'`;
}

/** Parses one expression (the text between `${{` and `}}`). Throws SyntaxProblem. */
export function parseExpression(src: string): ExprNode {
  return new Parser(tokenize(src)).parseAll();
}

const PREC: Record<BinaryOp, number> = { '||': 1, '&&': 2, '==': 3, '!=': 3, '<': 4, '<=': 4, '>': 4, '>=': 4 };
const UNARY_PREC = 5;
const NAME_RE = /^[A-Za-z0-9_-]+$/;

function precOf(n: ExprNode): number {
  if (n.kind === 'binary') return PREC[n.op];
  if (n.kind === 'not') return UNARY_PREC;
  return 6;
}

function wrap(n: ExprNode, min: number): string {
  const s = printExpression(n);
  return precOf(n) < min ? `(${s})` : s;
}

/** The object of a property/index access; number literals need parentheses (`(1).a`). */
function postfixObject(n: ExprNode): string {
  return n.kind === 'literal' && typeof n.value === 'number' ? `(${printExpression(n)})` : wrap(n, 6);
}

export function printLiteral(value: null | boolean | number | string): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `'${value.replace(/'/g, "''")}'`;
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  return String(value);
}

/** Canonical text of an AST; parseExpression(printExpression(n)) equals n up to positions. */
export function printExpression(n: ExprNode): string {
  switch (n.kind) {
    case 'literal':
      return printLiteral(n.value);
    case 'context':
      return n.name;
    case 'property':
      return `${postfixObject(n.object)}.${n.name}`;
    case 'index':
      return `${postfixObject(n.object)}[${printExpression(n.index)}]`;
    case 'not':
      return `!${wrap(n.operand, UNARY_PREC)}`;
    case 'call':
      return `${n.name}(${n.args.map(printExpression).join(', ')})`;
    case 'binary':
      return `${wrap(n.left, PREC[n.op])} ${n.op} ${wrap(n.right, PREC[n.op] + 1)}`;
  }
}

/** True when `name` can be printed after '.' (otherwise use ['name']). */
export function isDotName(name: string): boolean {
  return NAME_RE.test(name);
}
