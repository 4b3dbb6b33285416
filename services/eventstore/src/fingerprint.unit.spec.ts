import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { codeFingerprint } from "./fingerprint.js";

describe("codeFingerprint", () => {
  let root: string;
  const write = (path: string, text: string) => {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), text);
  };
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "fingerprint-"));
    write("svc/package.json", JSON.stringify({ name: "@ephemera/svc" }));
    write("svc/dist/main.js", "fold v1");
    write("svc/node_modules/@ephemera/events/dist/index.js", "decode v1");
    write("other/package.json", JSON.stringify({ name: "jest" }));
    write("other/bin/jest.js", "x");
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("is the same for the same code and changes with the service's code or a package it holds", () => {
    const main = join(root, "svc/dist/main.js");
    const first = codeFingerprint(main);
    expect(codeFingerprint(main)).toBe(first);
    write("svc/node_modules/@ephemera/events/dist/index.js", "decode v2");
    const second = codeFingerprint(main);
    expect(second).not.toBe(first);
    write("svc/dist/main.js", "fold v2");
    expect(codeFingerprint(main)).not.toBe(second);
  });

  it("hashes nothing for a script outside an @ephemera package (a test runner)", () => {
    expect(codeFingerprint(join(root, "other/bin/jest.js"))).toBe(codeFingerprint(undefined));
  });
});
