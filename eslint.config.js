import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * Two config blocks per zone (a later block replaces an earlier one's rule for the files it
 * matches): any file of the zone must not climb into a denied top-level folder, and production
 * files (not tests or test kits) must not reach test/ or bench/ either.
 */
const TEST_FILES = ['**/*.test.ts', '**/testkit.ts', '**/testing/**'];
function zones(list) {
  const rule = (deny, why) => ({
    'no-restricted-imports': ['error', {
      patterns: [{ regex: `^(\\.\\./)+(${deny.join('|')})/`, message: `wrong-way import: ${why} (DESIGN.md §2)` }],
    }],
  });
  return list.flatMap(({ files, deny, why }) => [
    { files, rules: rule(deny, why) },
    { files, ignores: TEST_FILES, rules: rule([...deny, 'test', 'bench'], `${why}; production code imports no test or bench code`) },
  ]);
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'helm/**', 'crds/**', '**/fixtures/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Plain JavaScript scripts (examples/servers) run on Node.
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly', Buffer: 'readonly', setTimeout: 'readonly' },
    },
  },
  // Imports point down only (DESIGN.md §2). Each zone lists the folders its files must not import;
  // test/eslint-zones.test.ts lints a wrong-way import in every zone and expects these errors.
  ...zones([
    { files: ['common/**'], deny: ['server', 'worker', 'client', 'operator', 'cli', 'ui'], why: 'common/ is the bottom layer' },
    { files: ['playbook/**'], deny: ['server', 'worker', 'client', 'operator', 'cli', 'ui'], why: 'playbook/ is the language, below every process' },
    { files: ['worker/**', 'client/**', 'operator/**'], deny: ['server', 'cli'], why: 'worker/, client/ and operator/ reach the server through its HTTP API only' },
    { files: ['ui/**'], deny: ['server', 'worker', 'cli', 'operator'], why: 'ui/ reads the HTTP API only' },
    { files: ['server/**', 'cli/**'], deny: [], why: 'server/ and cli/ may import every layer below them' },
  ]),
  {
    // The engine is pure: (state, event, playbook) → decision. No I/O, no store, no broker.
    files: ['server/engine/**'],
    ignores: ['**/*.test.ts', 'server/engine/testkit.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { regex: '^node:', message: 'server/engine/ is pure: no Node I/O' },
          { regex: '^(pg|@nats-io/.*|undici|fastify)$', message: 'server/engine/ is pure: no database, broker or HTTP' },
          { regex: '/(store|broker|executions|app|secrets|schedules)/', message: 'server/engine/ is pure: it imports no store, broker or service' },
        ],
      }],
    },
  },
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
);
