// The sandbox rows, virtualized: only the rows in view are in the document. A grid on a wide
// screen, cards on a narrow one (each a fixed height, so the virtualizer needs no measuring).
import { useVirtualizer } from "@tanstack/react-virtual";
import { useEffect, useRef } from "react";
import { Link } from "wouter";
import { age, localTime, relative } from "../format";
import { useMediaQuery, useNow } from "../hooks";
import type { SandboxRow } from "../types";
import { Labels, StatusBadge } from "./common";

export function SandboxTable({ rows }: { rows: SandboxRow[] }) {
  const narrow = useMediaQuery("(max-width: 760px)");
  const now = useNow(5000);
  const scroller = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => (narrow ? 112 : 44),
    overscan: 12,
    getItemKey: (i) => rows[i]?.name ?? i,
  });
  // A new row height means every offset changes.
  useEffect(() => virtualizer.measure(), [narrow, virtualizer]);
  return (
    <div className="sandbox-table" role="table" aria-label="Sandboxes" aria-rowcount={rows.length + 1}>
      {!narrow && (
        <div className="sandbox-row head" role="row">
          <span role="columnheader">Name</span>
          <span role="columnheader">Status</span>
          <span role="columnheader">Cluster</span>
          <span role="columnheader">Labels</span>
          <span role="columnheader">Age</span>
          <span role="columnheader">Deletion</span>
        </div>
      )}
      <div className="sandbox-scroll" ref={scroller}>
        <div style={{ height: virtualizer.getTotalSize(), position: "relative" }} role="rowgroup">
          {virtualizer.getVirtualItems().map((item) => {
            const row = rows[item.index];
            if (!row) return null;
            return (
              <div key={item.key} role="row" aria-rowindex={item.index + 2} data-testid={`sandbox-row-${row.name}`}
                className={`sandbox-row${narrow ? " card" : ""}`}
                style={{ position: "absolute", top: 0, left: 0, right: 0, height: item.size, transform: `translateY(${item.start}px)` }}>
                <span role="cell" className="name"><Link href={`/sandboxes/${encodeURIComponent(row.name)}`}>{row.name}</Link></span>
                <span role="cell"><StatusBadge status={row.status} /></span>
                <span role="cell" className="muted">{row.cluster}</span>
                <span role="cell" className="cell-labels"><Labels labels={row.labels} /></span>
                <span role="cell" title={localTime(row.createdAt)}>{age(row.createdAt, now)}</span>
                <span role="cell" title={localTime(row.scheduledDeleteTime)}>
                  {row.scheduledDeleteTime ? relative(row.scheduledDeleteTime, now) : row.ttl ? `ttl ${row.ttl}` : "—"}
                </span>
              </div>
            );
          })}
        </div>
      </div>
    </div>
  );
}
