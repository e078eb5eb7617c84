// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

/** Relative imports of these top-level folders, from a folder one or two levels down (`../worker`, `../../worker/main`...). */
const folders = (...names) => names.flatMap((name) => [`../${name}`, `../${name}/**`, `../../${name}`, `../../${name}/**`]);

/**
 * The layers, bottom up: domain/ (pure, shared by all) and workflows/; config/ (how every process reads its
 * environment), catalog/ and storage/; servers/ (the Temporal servers and PostgreSQL started for development and
 * tests); activities/; client/ (the SDK); contract/ (the SDK's calls for services in any language); worker/ (runs
 * workflows, activities and the contract's calls); cli/ on top. Each folder imports only from below; these rules keep the directions.
 */
const CATALOG_LAYER =
  'catalog/, storage/ and config/ know nothing of the SDK, the worker or workflows: shared contracts live in domain/contracts.ts.';

const layer = (files, forbidden, message) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns: [{ group: forbidden, message }] }] },
});

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      'dist.*/**',
      '.tablefate/**',
      'coverage/**',
      'bin/**',
      'eslint.config.mjs',
      'jest.config.js',
      'jest.cluster.config.js',
      'jest.chaos.config.js',
    ],
  },
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
                '../cli',
                '../cli/**',
                '../config',
                '../config/**',
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
  layer(
    ['client/**/*.ts'],
    [...folders('worker', 'activities', 'storage', 'cli', 'servers'), '@temporalio/worker', '@temporalio/activity'],
    'the SDK (client/) stays thin: it imports the domain, the config and the catalog, never worker/, activities/, storage/, servers/ or cli/.',
  ),
  layer(
    ['servers/**/*.ts'],
    folders('client', 'cli', 'worker', 'activities', 'workflows', 'catalog', 'storage'),
    'servers/ (the Temporal servers and the PostgreSQL tablefate starts for development and tests) stands on domain/ and config/ alone.',
  ),
  layer(
    ['worker/**/*.ts'],
    folders('client', 'cli'),
    "worker/ imports nothing from client/ or cli/: what both need lives in domain/ or config/ (the contract's calls, which run the SDK, in contract/).",
  ),
  layer(
    ['contract/**/*.ts'],
    folders('cli', 'worker', 'activities', 'storage', 'servers'),
    'contract/ (the calls offered to services in any language) stands on the SDK (client/) and the domain; the worker runs it, the command line prints it.',
  ),
  layer(
    ['activities/**/*.ts'],
    folders('client', 'cli', 'worker'),
    'activities/ sits below the worker, the SDK and the command line: it imports none of them.',
  ),
  // (One entry per folder: a later entry's no-restricted-imports replaces an earlier one's for the same file.)
  layer(
    ['catalog/**/*.ts', 'storage/**/*.ts', 'config/**/*.ts'],
    folders('client', 'cli', 'worker', 'activities', 'workflows'),
    CATALOG_LAYER,
  ),
  {
    // The catalog's contract and rules are written once for every store: no driver in them (catalog/rules.ts and
    // catalog/rules-*.ts). This entry comes after catalog/'s layer, which it repeats, since it replaces that entry's rule
    // for these files.
    files: ['catalog/catalog.ts', 'catalog/tx.ts', 'catalog/rules*.ts', 'catalog/migrations.ts', 'catalog/rows.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: ['pg', 'better-sqlite3'].map((name) => ({
            name,
            message: 'Driver code belongs in a store (catalog/sqlite*.ts, catalog/postgres*.ts).',
          })),
          patterns: [
            { group: ['./sqlite*', './postgres*'], message: 'The rules import no store.' },
            { group: folders('client', 'cli', 'worker', 'activities', 'workflows'), message: CATALOG_LAYER },
          ],
        },
      ],
    },
  },
);
