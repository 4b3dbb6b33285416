// Small pieces the pages share: status badges, error and empty states, key/value lists, labels.
import type { ReactNode } from "react";

/** The colour family of a status word, for badges and graph nodes. */
export function tone(status: string | undefined): string {
  switch (status) {
    case "Ready": case "Succeeded": case "Available": case "Connected": case "Provisioned":
      return "ok";
    case "Running": case "Creating": case "Updating": case "Provisioning": case "Applying": case "Progressing": case "Deprovisioning": case "Deleting": case "Removing":
      return "busy";
    case "Retrying": case "Queued": case "SandboxesNotReady": case "NoRunner":
      return "wait";
    case "Cancelled": case "Deleted": case "Deprovisioned": case "Skipped": case "Disconnected":
      return "off";
    case "Pending": case undefined: case "":
      return "idle";
    default:
      return "bad";
  }
}

export function StatusBadge({ status }: { status: string | undefined }) {
  return <span className={`badge tone-${tone(status)}`}>{status || "Pending"}</span>;
}

export function ErrorBox({ children }: { children: ReactNode }) {
  return <div className="error" role="alert">{children}</div>;
}

export function Loading() {
  return <p className="muted" role="status">Loading…</p>;
}

export function Labels({ labels }: { labels: Record<string, string> | undefined }) {
  const entries = Object.entries(labels ?? {});
  if (!entries.length) return null;
  return (
    <span className="labels">
      {entries.map(([k, v]) => <span key={k} className="label">{k}={v}</span>)}
    </span>
  );
}

export function Facts({ items }: { items: [string, ReactNode][] }) {
  return (
    <dl className="facts">
      {items.filter(([, v]) => v !== undefined && v !== null && v !== "").map(([k, v]) => (
        <div key={k}><dt>{k}</dt><dd>{v}</dd></div>
      ))}
    </dl>
  );
}

/** A table that scrolls sideways on a narrow screen rather than overflowing the page. */
export function TableScroll({ children, label }: { children: ReactNode; label: string }) {
  return <div className="table-scroll" role="region" aria-label={label} tabIndex={0}>{children}</div>;
}
