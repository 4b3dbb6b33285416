// Reads a service's /metrics the way Prometheus does: the text format's `# TYPE` lines and
// its samples (`name{label="value",...} number`), strictly enough that a malformed
// exposition fails the test that reads it.

export interface Sample { name: string; labels: Record<string, string>; value: number }
export interface Exposition { types: Map<string, string>; samples: Sample[] }

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: -?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("# HELP ")) continue;
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(" ");
      if (!name || !type || !TYPES.has(type)) throw new Error(`bad TYPE line: ${line}`);
      types.set(name, type);
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const [, name = "", body = "", raw = ""] = m;
    const value = sampleValue(raw);
    if (value === undefined) throw new Error(`bad sample value: ${line}`);
    const labels: Record<string, string> = {};
    LABEL.lastIndex = 0;
    while (LABEL.lastIndex < body.length) {
      const l = LABEL.exec(body);
      if (!l) throw new Error(`bad labels: ${line}`);
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    // Every sample belongs to a family declared before it (histograms add _bucket, _sum, _count).
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, "");
    if (!types.has(family)) throw new Error(`sample of an undeclared family: ${line}`);
    samples.push({ name, labels, value });
  }
  return { types, samples };
}

/** As Prometheus reads a value (Go's ParseFloat): NaN and Inf in any case (prom-client writes `Nan`). */
function sampleValue(raw: string): number | undefined {
  const word = raw.toLowerCase().replace(/^\+/, "");
  if (word === "nan") return NaN;
  if (word === "inf" || word === "-inf") return word === "inf" ? Infinity : -Infinity;
  const n = Number(raw);
  return raw !== "" && Number.isFinite(n) ? n : undefined;
}

/** The sum of the samples named `name` whose labels include `where`. */
export function total(e: Exposition, name: string, where: Record<string, string> = {}): number {
  return e.samples
    .filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}

/** Fetches and parses `http://<address>/metrics`, checking the status and content type. */
export async function scrape(address: string): Promise<Exposition> {
  const res = await fetch(`http://${address}/metrics`, { signal: AbortSignal.timeout(5000) });
  if (res.status !== 200) throw new Error(`GET /metrics of ${address}: ${res.status}`);
  const type = res.headers.get("content-type") ?? "";
  if (!/^text\/plain; version=0\.0\.4/.test(type)) throw new Error(`GET /metrics of ${address}: content type ${type}`);
  return parseExposition(await res.text());
}
