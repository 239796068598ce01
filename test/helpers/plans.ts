/**
 * The plans PostgreSQL runs on one connection, statements inside functions included, read with
 * auto_explain sent to the client as notices. For tests of what a plan the connection kept does.
 * auto_explain stays loaded in that session: release the client with `release(true)` afterwards.
 */
import type pg from 'pg';

/** From now on, every statement `client` runs sends its plan to it as a notice. */
export async function explainOn(client: pg.PoolClient): Promise<void> {
  for (const s of ["LOAD 'auto_explain'", 'SET auto_explain.log_min_duration = 0', 'SET auto_explain.log_nested_statements = on',
    'SET auto_explain.log_level = notice', 'SET client_min_messages = notice']) {
    await client.query(s);
  }
}

/** The plans (auto_explain's notices) that arrive on `client` while `fn` runs. */
export async function plansOf(client: pg.PoolClient, fn: () => Promise<unknown>): Promise<string[]> {
  const plans: string[] = [];
  const listen = (n: { message?: string }) => { if (n.message?.includes('plan:')) plans.push(n.message); };
  client.on('notice', listen);
  try {
    await fn();
  } finally {
    client.off('notice', listen);
  }
  return plans;
}
