// Node decodes the command line leniently, so a byte that is not UTF-8 (a --set value from a
// Latin-1 shell, say) reaches eph as U+FFFD. The command line's own bytes tell the two apart.
import { firstInvalidUtf8 } from "@ephemera/kit/utf8";

/**
 * Why the last `count` arguments of `cmdline` (NUL-terminated, as /proc/self/cmdline) are
 * not all UTF-8, or undefined when they are. Names the argument, never its value.
 */
export function argumentNotUtf8(cmdline: Uint8Array, count: number): string | undefined {
  const all: Uint8Array[] = [];
  for (let start = 0; start < cmdline.length;) {
    const end = cmdline.indexOf(0, start);
    const stop = end < 0 ? cmdline.length : end;
    all.push(cmdline.subarray(start, stop));
    start = stop + 1;
  }
  const first = all.length - count;
  for (let i = Math.max(first, 0); i < all.length; i++) {
    const bad = firstInvalidUtf8(all[i]!);
    if (!bad) continue;
    const previous = i > first ? new TextDecoder().decode(all[i - 1]) : "";
    const after = previous.startsWith("-") ? ` (after ${previous})` : "";
    const which = `argument ${i - first + 1}${after}`;
    return `${which} is not valid UTF-8 at byte ${bad.byte}; arguments are UTF-8 and eph rewrites none`;
  }
  return undefined;
}
