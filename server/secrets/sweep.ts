/**
 * Background clean-up for the server sweeper: expired keychain entries (global entries live until
 * their TTL; local/shared ones also go at expiry if their execution never finished) and expired
 * authentication-cache rows.
 */
import type pg from 'pg';
import { deleteExpiredKeychain } from '../store/keychain.js';
import { deleteExpiredAuthCache } from '../store/credentials.js';

export interface SweepOptions {
  /** auto_renew entries stay this long past expiry so a worker can still renew them. Default 86400. */
  renewGraceSeconds?: number;
}

export async function sweepExpired(db: Pick<pg.Pool, 'query'> | { pool: Pick<pg.Pool, 'query'> }, opts: SweepOptions = {}): Promise<{ keychain: number; auth_cache: number }> {
  const q = 'pool' in db ? db.pool : db;
  const keychain = await deleteExpiredKeychain(q, opts.renewGraceSeconds ?? 86400);
  const authCache = await deleteExpiredAuthCache(q);
  return { keychain, auth_cache: authCache };
}
