import { test } from 'node:test';
import assert from 'node:assert/strict';
import { validateGroups } from '../../src/domain/carrierInput.js';
import { DomainError } from '../../src/domain/errors.js';

test('group QPS must be a whole number ≥ 1 (the limiter admits whole calls per one-second window); the error names the field', () => {
  assert.deepEqual(validateGroups([{ name: 'main', qps: 5 }]), [{ name: 'main', qps: 5 }]);
  for (const qps of [0.5, 2.5, 0, -1, '5']) {
    assert.throws(
      () =>
        validateGroups([
          { name: 'main', qps: 5 },
          { name: 'slow', qps },
        ]),
      (error: unknown) => error instanceof DomainError && error.field === 'groups[1].qps' && /integer between 1 and/.test(error.message),
      `qps ${String(qps)}`,
    );
  }
});
