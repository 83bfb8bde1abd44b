import assert from 'node:assert/strict';
import fc from 'fast-check';
import { matchesSelector, validateSelector, type LabelSelector } from './selector.ts';

const labels = { app: 'web', tier: 'front' };

describe('run-scheduler label selectors', () => {
  it('matches matchLabels and every matchExpressions operator', () => {
    assert.equal(matchesSelector({ matchLabels: { app: 'web' } }, labels), true);
    assert.equal(matchesSelector({ matchLabels: { app: 'web', tier: 'back' } }, labels), false);
    assert.equal(matchesSelector({ matchLabels: { missing: '' } }, labels), false, 'a missing label never equals ""');
    assert.equal(matchesSelector({ matchLabels: { missing: '' } }, { missing: '' }), true);
    assert.equal(
      matchesSelector({ matchExpressions: [{ key: 'app', operator: 'In', values: ['api', 'web'] }] }, labels),
      true,
    );
    assert.equal(
      matchesSelector({ matchExpressions: [{ key: 'app', operator: 'In', values: ['api'] }] }, labels),
      false,
    );
    assert.equal(
      matchesSelector({ matchExpressions: [{ key: 'gone', operator: 'In', values: ['x'] }] }, labels),
      false,
    );
    assert.equal(
      matchesSelector({ matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['api'] }] }, labels),
      true,
    );
    assert.equal(
      matchesSelector({ matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }, labels),
      false,
    );
    assert.equal(
      matchesSelector({ matchExpressions: [{ key: 'gone', operator: 'NotIn', values: ['x'] }] }, labels),
      true,
      'NotIn matches absent keys',
    );
    assert.equal(matchesSelector({ matchExpressions: [{ key: 'tier', operator: 'Exists' }] }, labels), true);
    assert.equal(matchesSelector({ matchExpressions: [{ key: 'gone', operator: 'Exists' }] }, labels), false);
    assert.equal(matchesSelector({ matchExpressions: [{ key: 'gone', operator: 'DoesNotExist' }] }, labels), true);
    assert.equal(matchesSelector({ matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, labels), false);
    assert.equal(
      matchesSelector(
        { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['front'] }] },
        labels,
      ),
      false,
      'all requirements are ANDed',
    );
    assert.equal(matchesSelector({}, labels), true, 'empty selector matches everything');
    assert.equal(matchesSelector(undefined, labels), false, 'absent selector matches nothing');
    assert.equal(matchesSelector({ matchLabels: { constructor: 'x' } }, {}), false, 'no prototype lookups');
    assert.equal(matchesSelector({ matchExpressions: [{ key: 'toString', operator: 'Exists' }] }, {}), false);
  });

  it('validates like LabelSelectorAsSelector', () => {
    assert.equal(validateSelector({ matchLabels: { 'kruntimes.io/job': 'build' } }), undefined);
    assert.equal(
      validateSelector({
        matchExpressions: [
          { key: 'a', operator: 'Exists' },
          { key: 'b', operator: 'In', values: ['x', ''] },
        ],
      }),
      undefined,
    );
    assert.match(validateSelector({ matchLabels: { 'bad key': 'x' } }) ?? '', /label key "bad key"/);
    assert.match(validateSelector({ matchLabels: { 'Bad.Prefix/x': 'x' } }) ?? '', /prefix must be a DNS subdomain/);
    assert.match(validateSelector({ matchLabels: { a: 'no spaces' } }) ?? '', /label value "no spaces"/);
    assert.match(validateSelector({ matchLabels: { a: 'x'.repeat(64) } }) ?? '', /label value/);
    assert.match(
      validateSelector({ matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }) ?? '',
      /can't be empty/,
    );
    assert.match(
      validateSelector({ matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }) ?? '',
      /must be empty/,
    );
    assert.match(
      validateSelector({ matchExpressions: [{ key: 'a', operator: 'Near', values: ['x'] }] }) ?? '',
      /"Near" is not a valid label selector operator/,
    );
    assert.match(validateSelector(undefined) ?? '', /no label selector/);
  });

  it('obeys the operator algebra (matchLabels ≡ In{v}, NotIn ≡ ¬In, DoesNotExist ≡ ¬Exists)', () => {
    const key = fc.constantFrom('a', 'b', 'c');
    const value = fc.constantFrom('x', 'y', '');
    const labelSet = fc.dictionary(key, value);
    fc.assert(
      fc.property(labelSet, key, value, fc.array(value, { minLength: 1, maxLength: 3 }), (ls, k, v, vs) => {
        const sel = (s: LabelSelector): boolean => matchesSelector(s, ls);
        assert.equal(
          sel({ matchLabels: { [k]: v } }),
          sel({ matchExpressions: [{ key: k, operator: 'In', values: [v] }] }),
        );
        assert.equal(
          sel({ matchExpressions: [{ key: k, operator: 'NotIn', values: vs }] }),
          !sel({ matchExpressions: [{ key: k, operator: 'In', values: vs }] }),
        );
        assert.equal(
          sel({ matchExpressions: [{ key: k, operator: 'DoesNotExist' }] }),
          !sel({ matchExpressions: [{ key: k, operator: 'Exists' }] }),
        );
      }),
    );
  });
});
