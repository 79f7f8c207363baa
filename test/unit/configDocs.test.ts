/**
 * docs/configuration.md is generated from the configuration schema (scripts/configDocs.ts) and
 * must be current: a variable added, changed or described anew without `npm run docs:config` fails here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { configSchema } from '../../src/config/index.js';
import { CONFIG_DOC, renderConfigReference, schemaDescriptions } from '../../scripts/configDocs.js';

test('every variable of the schema has a description', () => {
  const descriptions = schemaDescriptions();
  for (const name of Object.keys(configSchema.shape)) assert.ok(descriptions.get(name), `${name} has no doc comment in src/config/index.ts`);
});

test('docs/configuration.md is what `npm run docs:config` generates now', async () => {
  const expected = await renderConfigReference();
  assert.equal(readFileSync(CONFIG_DOC, 'utf8'), expected, 'docs/configuration.md is stale: run `npm run docs:config`');
  for (const name of Object.keys(configSchema.shape)) assert.ok(expected.includes(`\`${name}\``), name);
});
