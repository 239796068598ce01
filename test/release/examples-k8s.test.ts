/**
 * examples/k8s/*.yaml are applied as they are (`kubectl -n <ns> apply -f examples/k8s/`, the
 * release test and e2e/run.sh): no document may pin a namespace (kubectl refuses a namespace that
 * differs from -n), and nothing may call a host outside the cluster (no internet in CI, air-gapped
 * clusters). The release test runs the Playbook for real.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from './render.js';

const DIR = path.join(ROOT, 'examples', 'k8s');
const FILES = readdirSync(DIR).filter((f) => f.endsWith('.yaml')).sort();

describe('examples/k8s', () => {
  it('has the Playbook, Credential, Schedule and WorkerPool examples', () => {
    expect(FILES).toEqual(['credential.yaml', 'playbook.yaml', 'schedule.yaml', 'workerpool.yaml']);
  });

  for (const file of FILES) {
    it(`${file}: no hard-coded namespace, no external endpoint`, () => {
      const text = readFileSync(path.join(DIR, file), 'utf8');
      for (const doc of parseAllDocuments(text).map((d) => d.toJS()).filter(Boolean)) {
        expect(doc.metadata?.namespace, `${file} ${doc.kind}/${doc.metadata?.name}`).toBeUndefined();
        const urls = JSON.stringify(doc).match(/\bhttps?:\/\/[^\s"'/]+/g) ?? [];
        for (const u of urls) expect(u, `${file} calls ${u}`).toMatch(/^https?:\/\/(localhost|127\.0\.0\.1|[a-z0-9-]+(\.[a-z0-9-]+)*\.svc(\.cluster\.local)?)(:\d+)?$/);
      }
    });
  }
});
