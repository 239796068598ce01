/** A virtualised list: only the rows in view are in the DOM (10,000 events stay fast). */
import { useVirtualizer } from '@tanstack/react-virtual';
import { useEffect, useRef, type ReactNode } from 'react';

export function VirtualList<T>({ items, rowHeight, height, render, testId }: {
  items: T[];
  rowHeight: number;
  height: number;
  render: (item: T, index: number) => ReactNode;
  testId?: string;
}) {
  const parent = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({ count: items.length, getScrollElement: () => parent.current, estimateSize: () => rowHeight, overscan: 10 });
  return (
    <div ref={parent} className="vlist" style={{ height }} data-testid={testId} data-count={items.length}>
      <div style={{ height: v.getTotalSize(), position: 'relative' }}>
        {v.getVirtualItems().map((r) => (
          <div key={r.key} className="vrow" style={{ position: 'absolute', top: 0, left: 0, right: 0, height: rowHeight, transform: `translateY(${r.start}px)` }}>
            {render(items[r.index], r.index)}
          </div>
        ))}
      </div>
    </div>
  );
}

/**
 * A virtualised list of `count` rows whose items arrive in pages: only the rows in view are in
 * the DOM, and `onRange` asks for the rows in view (plus overscan) so their pages get fetched.
 * A row not fetched yet renders `placeholder`.
 */
export function PagedList<T>({ count, get, onRange, rowHeight, height, render, placeholder, testId }: {
  count: number;
  get: (index: number) => T | undefined;
  onRange: (start: number, end: number) => void;
  rowHeight: number;
  height: number;
  render: (item: T, index: number) => ReactNode;
  placeholder: (index: number) => ReactNode;
  testId?: string;
}) {
  const parent = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({ count, getScrollElement: () => parent.current, estimateSize: () => rowHeight, overscan: 20 });
  const rows = v.getVirtualItems();
  const start = rows[0]?.index ?? 0;
  const end = rows[rows.length - 1]?.index ?? -1;
  useEffect(() => {
    if (end >= start) onRange(start, end);
  }, [start, end, count, onRange]);
  return (
    <div ref={parent} className="vlist" style={{ height }} data-testid={testId} data-count={count}>
      <div style={{ height: v.getTotalSize(), position: 'relative' }}>
        {rows.map((r) => {
          const item = get(r.index);
          return (
            <div key={r.key} className="vrow" data-loaded={item !== undefined} style={{ position: 'absolute', top: 0, left: 0, right: 0, height: rowHeight, transform: `translateY(${r.start}px)` }}>
              {item === undefined ? placeholder(r.index) : render(item, r.index)}
            </div>
          );
        })}
      </div>
    </div>
  );
}
