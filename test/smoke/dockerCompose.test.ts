import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

interface Compose {
  services: Record<string, { command?: string[] | string; ports?: string[] }>;
}

test('docker-compose.yml parses and names the services with the right settings', () => {
  const compose = parse(readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8')) as Compose;
  for (const name of ['postgres', 'redis', 'temporal', 'workers', 'api', 'simulator']) {
    assert.ok(compose.services[name], `service ${name} is missing`);
  }
  assert.ok(String(compose.services.redis?.command).includes('noeviction'), 'redis must run with noeviction');
  assert.ok(compose.services.temporal?.ports?.some((p) => p.endsWith(':8233')), 'temporal must publish its Web UI');
  for (const service of Object.values(compose.services)) {
    for (const port of service.ports ?? []) assert.match(port, /^127\.0\.0\.1:/, `port ${port} must bind to loopback`);
  }
});
