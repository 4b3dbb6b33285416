import { EnvFileError, renderEnvFile, shQuote, stepEnv } from "./envfile.js";

const input = (name: string, env: string, value: string, present = true) => ({ name, env, path: "", value: Buffer.from(value), present });

describe("the env file", () => {
  it("quotes every byte but the single quote literally, and closes, escapes and reopens around each quote", () => {
    expect(shQuote("it's $HOME").toString()).toBe("'it'\\''s $HOME'");
    expect(shQuote("''").toString()).toBe("''\\'''\\'''");
    expect(shQuote(Buffer.from([0xff, 0x0a]))).toEqual(Buffer.from([0x27, 0xff, 0x0a, 0x27]));
  });

  it("sets HOME first and then the present inputs that have a variable, in order", () => {
    const env = stepEnv({ script: "", outputs: [], inputs: [input("a", "A", "1"), input("b", "", "2"), input("c", "C", "", false), input("h", "HOME", "/work")] });
    expect(env.map((v) => [v.name, v.value.toString()])).toEqual([["HOME", "/tmp"], ["A", "1"], ["HOME", "/work"]]);
  });

  it("refuses a NUL byte and a name sh cannot export, naming the variable and never the value", () => {
    const nul = (() => { try { renderEnvFile([{ name: "TOKEN", value: Buffer.from("s3cret\0") }]); } catch (e) { return e; } })();
    expect(nul).toBeInstanceOf(EnvFileError);
    expect((nul as Error).message).toContain("TOKEN");
    expect((nul as Error).message).not.toContain("s3cret");
    expect(() => renderEnvFile([{ name: "A-B", value: Buffer.from("x") }])).toThrow('"A-B" is not a name sh can export');
  });
});
