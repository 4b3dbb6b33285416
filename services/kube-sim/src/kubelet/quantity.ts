// Kubernetes resource quantities ("64Mi", "1G", "500m", "2") as the numbers Docker's
// --memory (bytes) and --cpus (cores) take.
const SUFFIX: Record<string, number> = {
  "": 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

export class QuantityError extends Error {
  override readonly name = "QuantityError";
}

/** Pure: the value of a quantity; `field` names it in the error. */
export function quantity(text: unknown, field: string): number {
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+))?([a-zA-Z]*)$/.exec(String(text).trim());
  const factor = m ? SUFFIX[m[3]!] : undefined;
  if (!m || factor === undefined) throw new QuantityError(`${field}: "${String(text)}" is not a quantity (a number with an optional suffix such as m, Mi, Gi, k, M, G)`);
  return Number(m[1]) * 10 ** Number(m[2] ?? 0) * factor;
}
