import { useEffect, useRef, useState } from 'react';

/** Calls `load` now and every `ms` (when given) while mounted; keeps the last value and error. */
export function usePoll<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[], ms?: number): { data?: T; error?: unknown; reload: () => void } {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    const ac = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const v = await loadRef.current(ac.signal);
        if (!ac.signal.aborted) {
          setData(v);
          setError(undefined);
        }
      } catch (e) {
        if (!ac.signal.aborted) setError(e);
      }
      if (ms && !ac.signal.aborted) timer = setTimeout(run, ms);
    };
    void run();
    return () => {
      ac.abort();
      if (timer) clearTimeout(timer);
    };
  }, [...deps, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}
