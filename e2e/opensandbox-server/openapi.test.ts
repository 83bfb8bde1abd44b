import assert from 'node:assert/strict';
import { specPath } from '../../lib/opensandbox/gen.ts';
import { SpecValidator } from './openapi.ts';

describe('OpenAPI validator (vendored sandbox-lifecycle.yml)', () => {
  const v = SpecValidator.fromFile(specPath());
  const schema = (name: string): Record<string, unknown> => ({ $ref: `#/components/schemas/${name}` });

  it('finds operations and path parameters', () => {
    const f = v.find('DELETE', '/sandboxes/abc');
    assert.deepEqual([f?.template, f?.params], ['/sandboxes/{sandboxId}', { sandboxId: 'abc' }]);
    assert.equal(v.find('PUT', '/sandboxes'), undefined);
    assert.equal(v.find('GET', '/nope'), undefined);
  });

  it('validates schemas: required, additionalProperties, oneOf, minimum, minItems, formats, open maps', () => {
    assert.deepEqual(
      v.validate(schema('CreateSandboxRequest'), {
        image: { uri: 'x' },
        entrypoint: ['a'],
        timeout: 60,
        resourceLimits: { cpu: '1' },
      }),
      [],
    );
    assert.match(v.validate(schema('CreateSandboxRequest'), { timeout: 59 }).join(), /oneOf/);
    assert.match(v.validate(schema('CreateSandboxRequest'), { entrypoint: [] }).join(), /fewer than 1/);
    assert.match(v.validate(schema('ImageSpec'), { uri: 'x', extra: 1 }).join(), /additionalProperties/);
    assert.match(
      v.validate(schema('Sandbox'), { id: 'x', status: { state: 'Running' }, entrypoint: [] }).join(),
      /createdAt: required/,
    );
    assert.match(
      v
        .validate(schema('Sandbox'), { id: 'x', status: { state: 'Running' }, entrypoint: [], createdAt: 'yesterday' })
        .join(),
      /date-time/,
    );
    assert.match(v.validate(schema('ResourceLimits'), { cpu: 1 }).join(), /expected string/);
    assert.deepEqual(v.validate(schema('PVC'), { claimName: 'a', storageClass: null }), [], 'nullable');
  });

  it('validates requests: declared query parameters, coercion, security and body', () => {
    const list = v.find('GET', '/sandboxes')!;
    const ok = v.validateRequest(
      list,
      new URLSearchParams('state=Running&state=Paused&page=2'),
      { 'open-sandbox-api-key': 'k' },
      { present: false, json: false },
    );
    assert.deepEqual(ok, []);
    const bad = v.validateRequest(list, new URLSearchParams('page=0&x=1'), {}, { present: false, json: false });
    assert.deepEqual(bad.sort(), [
      'query parameter x: not declared',
      'query.page: below minimum 1',
      'security: no credentials for any security requirement',
    ]);
    const create = v.find('POST', '/sandboxes')!;
    assert.deepEqual(
      v.validateRequest(
        create,
        new URLSearchParams(),
        { 'open-sandbox-api-key': 'k' },
        { present: false, json: false },
      ),
      ['request body: required'],
    );
    assert.deepEqual(
      v.validateRequest(create, new URLSearchParams(), { 'open-sandbox-api-key': 'k' }, { present: true, json: false }),
      ['request body: content type must be application/json'],
    );
  });

  it('validates responses by status, body and declared headers; undeclared statuses need a documented drift entry', () => {
    const create = v.find('POST', '/sandboxes')!;
    assert.deepEqual(
      v.validateResponse(
        create,
        202,
        { 'x-request-id': '0f8c2b2e-1a7b-4a3e-9d55-1f2a3b4c5d6e', location: 'https://h/v1/sandboxes/a' },
        {
          present: true,
          value: { id: 'a', status: { state: 'Pending' }, createdAt: '2026-01-01T00:00:00Z', entrypoint: ['x'] },
        },
      ),
      [],
    );
    assert.match(
      v
        .validateResponse(
          create,
          202,
          { 'x-request-id': 'not-a-uuid' },
          {
            present: true,
            value: { id: 'a', status: { state: 'Pending' }, createdAt: '2026-01-01T00:00:00Z', entrypoint: ['x'] },
          },
        )
        .join(),
      /uuid/,
    );
    const err = { present: true, value: { code: 'X', message: 'y' } };
    assert.match(v.validateResponse(create, 429, {}, err).join(), /not declared/);
    assert.deepEqual(
      v.validateResponse(create, 429, { 'retry-after': '1' }, err, {
        429: {
          $ref: '#/components/responses/Error',
          headers: { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } },
        },
      }),
      [],
    );
    const del = v.find('DELETE', '/sandboxes/a')!;
    assert.deepEqual(v.validateResponse(del, 204, {}, { present: false }), []);
    assert.match(v.validateResponse(del, 204, {}, { present: true, value: {} }).join(), /body not expected/);
  });
});
