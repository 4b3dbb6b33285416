import { TERMINATION_MESSAGE_MAX, terminationMessage } from "./write.js";

describe("the report as a termination message", () => {
  it("leaves the output values out of a success, keeping names and sizes", () => {
    const text = terminationMessage({ outcome: "succeeded", outputs: [{ name: "dsn", size: 6, base64: Buffer.from("secret").toString("base64") }] });
    expect(JSON.parse(text)).toEqual({ outcome: "succeeded", outputs: [{ name: "dsn", size: 6 }] });
    expect(text).not.toContain(Buffer.from("secret").toString("base64"));
  });

  it("says when the outputs did not reach the IO context", () => {
    expect(JSON.parse(terminationMessage({ outcome: "succeeded", outputs: [], stored: false }))).toEqual({ outcome: "succeeded", outputs: [], stored: false });
  });

  it("cuts a long failure message to fit Kubernetes' 4096 bytes, keeping the reason and exit code", () => {
    const text = terminationMessage({ outcome: "failed", reason: "Error", exitCode: 2, message: "é".repeat(5000) });
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(TERMINATION_MESSAGE_MAX);
    const parsed = JSON.parse(text) as { reason: string; exitCode: number; message: string };
    expect(parsed).toMatchObject({ reason: "Error", exitCode: 2 });
    expect(parsed.message.endsWith("…")).toBe(true);
    expect(parsed.message.length).toBeGreaterThan(1000);
  });

  it("drops the names of so many outputs that they would not fit", () => {
    const outputs = Array.from({ length: 200 }, (_, i) => ({ name: `output-with-a-long-name-${i}`, size: 1, base64: "eA==" }));
    const text = terminationMessage({ outcome: "succeeded", outputs });
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(TERMINATION_MESSAGE_MAX);
    expect(JSON.parse(text)).toEqual({ outcome: "succeeded", outputs: [] });
  });
});
