// The command line's own bytes (Node has already decoded it leniently): an argument that is
// not UTF-8 is named, with its first bad byte, and never its value (a --set value may be a secret).
import { argumentNotUtf8 } from "./argv.js";

/** /proc/self/cmdline's shape: each argument ends with a NUL. */
const cmdline = (...args: (string | Buffer)[]) => Buffer.concat(args.flatMap((a) => [Buffer.from(a), Buffer.from([0])]));

describe("argumentNotUtf8", () => {
  it("names the argument (counted after the program) and its first bad byte", () => {
    const raw = cmdline("node", "/eph/main.js", "plugin", "apply", "--set", Buffer.from([0x6e, 0x3d, 0x61, 0xc3, 0x28]));
    expect(argumentNotUtf8(raw, 4)).toBe("argument 4 (after --set) is not valid UTF-8 at byte 3; arguments are UTF-8 and eph rewrites none");
  });

  it("counts only the program's arguments, whatever options node was started with", () => {
    const raw = cmdline("node", "--enable-source-maps", "/eph/main.js", Buffer.from([0xff]), "x");
    expect(argumentNotUtf8(raw, 2)).toBe("argument 1 is not valid UTF-8 at byte 0; arguments are UTF-8 and eph rewrites none");
  });

  it("accepts UTF-8 arguments, multibyte characters and U+FFFD written as its bytes included", () => {
    expect(argumentNotUtf8(cmdline("node", "/eph/main.js", "--set", "n=é 日本 🎉 \uFFFD", ""), 3)).toBeUndefined();
    expect(argumentNotUtf8(cmdline("node", "/eph/main.js"), 0)).toBeUndefined();
  });
});
