// Injected API failures and watch drops (`POST /sim/faults`), so clients' retries and
// re-lists can be tested. `next: n` fails exactly the next n matching requests; `rate`
// draws from a seeded generator, so a test that gives a seed sees the same sequence.
import { errorForCode, type ApiError } from "../status.js";

export interface FaultSpec {
  seed?: number;
  apiErrors?: { rate?: number; next?: number; codes?: number[]; verbs?: string[]; resources?: string[] };
  watchDrops?: { rate?: number; next?: number; afterMs?: number };
}

/** mulberry32: small, seedable, good enough to pick which request fails. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Faults {
  private spec: FaultSpec = {};
  private random: () => number = generator(1);
  private apiNext = 0;
  private dropNext = 0;
  private codeTurn = 0;

  set(spec: FaultSpec, seed: number): void {
    this.spec = spec;
    this.random = generator(spec.seed ?? seed);
    this.apiNext = spec.apiErrors?.next ?? 0;
    this.dropNext = spec.watchDrops?.next ?? 0;
    this.codeTurn = 0;
  }

  clear(): void { this.set({}, 1); }

  /** The error to answer instead of serving `verb resource`, if one is due. */
  apiError(verb: string, resource: string): ApiError | undefined {
    const f = this.spec.apiErrors;
    if (!f) return undefined;
    if (f.verbs && !f.verbs.includes(verb)) return undefined;
    if (f.resources && !f.resources.includes(resource) && !f.resources.includes(resource.split("/")[0]!)) return undefined;
    if (!this.due(f, "apiNext")) return undefined;
    const codes = f.codes?.length ? f.codes : [500];
    return errorForCode(codes[this.codeTurn++ % codes.length]!);
  }

  /** After how many ms to cut a watch just opened, if it is to be cut. */
  watchDrop(): number | undefined {
    const f = this.spec.watchDrops;
    if (!f) return undefined;
    return this.due(f, "dropNext") ? f.afterMs ?? 500 : undefined;
  }

  /** `next` counts down exactly; otherwise a draw against `rate`. */
  private due(f: { rate?: number; next?: number }, counter: "apiNext" | "dropNext"): boolean {
    if (f.next === undefined) return this.random() < (f.rate ?? 0);
    if (this[counter] <= 0) return false;
    this[counter]--;
    return true;
  }
}
