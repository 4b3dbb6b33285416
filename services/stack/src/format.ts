// Human-readable rendering of the services' JSON log lines, for a terminal.
const LEVELS: Record<number, string> = { 10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" };
const SKIP = new Set(["level", "time", "pid", "hostname", "service", "name", "msg"]);

export function formatLine(service: string, line: string): string {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return `${service.padEnd(9)} ${line}`;
  }
  const time = typeof rec["time"] === "number" ? new Date(rec["time"]).toISOString().slice(11, 23) : "";
  const level = LEVELS[rec["level"] as number] ?? "";
  const extra = Object.entries(rec)
    .filter(([k]) => !SKIP.has(k))
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
  return `${time} ${service.padEnd(9)} ${level.padEnd(5)} ${String(rec["msg"] ?? "")}${extra ? `  ${extra}` : ""}`;
}
