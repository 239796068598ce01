/**
 * The layering of DESIGN.md §2 is structural: ESLint's zones (eslint.config.js) refuse a
 * wrong-way import. Each case lints one line as if it were in the named file, with the project's
 * real configuration, and expects the zone's error, or none for an import that points down.
 */
import { ESLint } from 'eslint';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const eslint = new ESLint({ cwd: root });

async function restricted(file: string, line: string): Promise<string[]> {
  const [result] = await eslint.lintText(`${line}\nexport const x = y;\n`, { filePath: path.join(root, file) });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('import zones', () => {
  it.each([
    ['worker/runtime.ts', "import { y } from '../server/executions/service.js';"],
    ['worker/tools/http.ts', "import { y } from '../../server/config.js';"],
    ['client/http.ts', "import { y } from '../server/secrets/credentials.js';"],
    ['operator/main.ts', "import { y } from '../server/app/index.js';"],
    ['common/protocol.ts', "import { y } from '../worker/runtime.js';"],
    ['common/broker/types.ts', "import { y } from '../../server/executions/types.js';"],
    ['playbook/types.ts', "import { y } from '../server/engine/index.js';"],
    ['server/executions/service.ts', "import { y } from '../../test/helpers/pg.js';"],
    ['ui/src/App.tsx', "import { y } from '../../server/app/index.js';"],
  ])('%s may not import %s', async (file, line) => {
    const messages = await restricted(file, line);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(/wrong-way import/);
  });

  it.each([
    ['server/engine/engine.ts', "import { y } from 'pg';", /no database/],
    ['server/engine/state.ts', "import { y } from 'node:fs';", /no Node I\/O/],
    ['server/engine/rules.ts', "import { y } from '../store/events.js';", /no store/],
  ])('the engine is pure: %s may not %s', async (file, line, message) => {
    const messages = await restricted(file, line);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatch(message);
  });

  it.each([
    ['worker/runtime.ts', "import { y } from '../common/broker/index.js';"],
    ['client/http.ts', "import { y } from '../common/protocol.js';"],
    ['server/app/index.ts', "import { y } from '../executions/service.js';"],
    ['cli/commands/server.ts', "import { y } from '../../server/main.js';"],
    ['worker/runtime.test.ts', "import { y } from '../test/helpers/pg.js';"],
    ['server/engine/engine.ts', "import { y } from '../../playbook/types.js';"],
  ])('%s may import %s', async (file, line) => {
    expect(await restricted(file, line)).toEqual([]);
  });
});
