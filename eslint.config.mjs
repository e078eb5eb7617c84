// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  { ignores: ['node_modules/**', '.tablefate/**', 'coverage/**', 'bin/**', 'eslint.config.mjs', 'jest.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The catalog's contract and rules are written once for every store: no driver in them (catalog/rules.ts).
    files: ['catalog/catalog.ts', 'catalog/tx.ts', 'catalog/rules.ts', 'catalog/migrations.ts', 'catalog/rows.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: ['pg', 'better-sqlite3'].map((name) => ({
            name,
            message: 'Driver code belongs in a store (catalog/sqlite*.ts, catalog/postgres*.ts).',
          })),
          patterns: [{ group: ['./sqlite*', './postgres*'], message: 'The rules import no store.' }],
        },
      ],
    },
  },
  {
    // Workflow code is replayed: it may not touch the outside world.
    files: ['workflows/**/*.ts', 'domain/**/*.ts', 'bench/floor-workflow.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({
            name,
            message: 'Node built-ins are not deterministic; keep them out of workflows/ and domain/.',
          })),
          patterns: [
            {
              allowTypeImports: true,
              group: [
                '../activities',
                '../activities/**',
                '../catalog',
                '../catalog/**',
                '../storage',
                '../storage/**',
                '../worker',
                '../worker/**',
                '../client',
                '../client/**',
                '@temporalio/client',
                '@temporalio/worker',
                '@temporalio/activity',
              ],
              message: 'workflows/ and domain/ import only @temporalio/workflow and pure code.',
            },
          ],
        },
      ],
    },
  },
);
