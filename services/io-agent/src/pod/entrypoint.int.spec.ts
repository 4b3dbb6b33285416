// The entrypoint under real shells (dash, bash in POSIX mode, busybox's ash as in alpine
// images when installed): the inputs become the script's environment byte for byte, and
// the exit code is recorded whole, whether the script exits, is killed, or is stopped.
import { existsSync } from "node:fs";
import { chmod, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "@ephemera/kit";
import { entrypointScript } from "./entrypoint.js";
import { renderEnvFile, type EnvVar } from "./envfile.js";
import { agentPaths } from "./layout.js";
import { start, stderrShows } from "./process.testkit.js";

const SHELLS: Array<[string, string[]]> = [
  ["dash", ["/bin/sh"]],
  ["bash --posix", ["bash", "--posix"]],
  ...(existsSync("/usr/bin/busybox") || existsSync("/bin/busybox") ? [["busybox ash", ["busybox", "sh"]] as [string, string[]]] : []),
];

/** Bytes sh must not interpret: quotes, expansions, newlines, a backslash, bytes that are not UTF-8. */
const TRICKY = Buffer.concat([Buffer.from("it's \"$HOME\" `id` $(id) \\n\nline2\t'"), Buffer.from([0xff, 0xfe, 0x80]), Buffer.from("-x ")]);

describe.each(SHELLS)("the entrypoint under %s", (_name, shell) => {
  let dir: string;
  let out: string;
  const paths = () => agentPaths(dir);

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "ephemera-agent-dir-"));
    out = await mkdtemp(join(tmpdir(), "ephemera-step-out-"));
    await writeFile(paths().entrypoint, entrypointScript(dir), { mode: 0o755 });
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(out, { recursive: true, force: true });
  });

  const prepare = async (script: string, vars: EnvVar[] = []) => {
    await writeFile(paths().env, renderEnvFile([{ name: "HOME", value: Buffer.from(out) }, ...vars]), { mode: 0o600 });
    await writeFile(paths().script, script, { mode: 0o755 });
    await chmod(paths().script, 0o755);
  };
  const entrypoint = () => start(shell[0]!, [...shell.slice(1), paths().entrypoint], { PATH: process.env["PATH"] });
  const recorded = async () => readFile(paths().exitCode, "utf8");

  it("gives the script its inputs as variables byte for byte, HOME as its working directory; an input named like the entrypoint's own variables changes nothing", async () => {
    await prepare(`#!/bin/sh\nprintf '%s' "$TRICKY" > tricky\nprintf '%s' "$EMPTY" > empty\npwd > pwd\n`, [
      { name: "TRICKY", value: TRICKY },
      { name: "EMPTY", value: Buffer.alloc(0) },
      { name: "dir", value: Buffer.from("/nonexistent") },
      { name: "child", value: Buffer.from("1") },
      { name: "code", value: Buffer.from("99") },
    ]);
    const ended = await entrypoint().ended();
    expect(ended.code).toBe(0);
    expect(await readFile(join(out, "tricky"))).toEqual(TRICKY);
    expect(await readFile(join(out, "empty"))).toEqual(Buffer.alloc(0));
    expect((await readFile(join(out, "pwd"), "utf8")).trim()).toBe(out);
    expect(await recorded()).toBe("0\n");
  });

  it("opens the declared outputs to the sidecar, which runs as another user than main may: a script's umask 077 or a copied 0600 input", async () => {
    const [secret, copied, missing] = [join(out, "secret"), join(out, "copied"), join(out, "never written")];
    await writeFile(paths().entrypoint, entrypointScript(dir, [secret, copied, missing]), { mode: 0o755 });
    await writeFile(join(out, "input"), "v", { mode: 0o600 });
    await prepare("#!/bin/sh\numask 077\nprintf s > secret\ncp input copied\n");
    const ended = await entrypoint().ended();
    expect(ended.code).toBe(0);
    for (const f of [secret, copied]) expect((await stat(f)).mode & 0o777).toBe(0o644);
    expect(await recorded()).toBe("0\n");
  });

  it("records a non-zero exit code and exits with it, leaving no temporary file", async () => {
    await prepare("#!/bin/sh\necho failing >&2\nexit 3\n");
    const ended = await entrypoint().ended();
    expect(ended.code).toBe(3);
    expect(ended.stderr).toContain("failing");
    expect(await recorded()).toBe("3\n");
    expect((await readdir(dir)).sort()).toEqual(["entrypoint", "env", "exit-code", "script"]);
  });

  it("records 128+9 for a script killed by SIGKILL", async () => {
    await prepare("#!/bin/sh\nkill -KILL $$\n");
    const ended = await entrypoint().ended();
    expect(ended.code).toBe(137);
    expect(await recorded()).toBe("137\n");
  });

  it("passes SIGTERM on to the script and records how it ended: its own exit code if it traps it, 128+15 if it does not", async () => {
    // Ready only once its sleep has started: a TERM while the shell forks it could leave the sleep
    // running past the script's end (its trap's $! not yet that sleep), holding the output pipe open.
    await prepare(`#!/bin/sh\ntrap 'kill $!; echo cleaned > cleaned; exit 42' TERM\nsleep 60 &\necho ready > ready\nwait $!\n`);
    let main = entrypoint();
    await waitFor(() => existsSync(join(out, "ready")), { timeoutMs: 10_000, what: "the script to start" });
    main.kill("SIGTERM");
    expect((await main.ended()).code).toBe(42);
    expect(await recorded()).toBe("42\n");
    expect(await readFile(join(out, "cleaned"), "utf8")).toBe("cleaned\n");

    await rm(paths().exitCode);
    await prepare(`#!/bin/sh\necho ready > ready2\nexec sleep 60\n`);
    main = entrypoint();
    // Before or after its exec, the script dies of the signal it does not trap.
    await waitFor(() => existsSync(join(out, "ready2")), { timeoutMs: 10_000, what: "the script to start" });
    main.kill("SIGTERM");
    expect((await main.ended()).code).toBe(143);
    expect(await recorded()).toBe("143\n");
  });

  it("without the env file init writes, says what is missing and records 127", async () => {
    const main = entrypoint();
    await stderrShows(main, `${dir}/env is missing: the ephemera-init container did not prepare this step`);
    expect((await main.ended()).code).toBe(127);
    expect(await recorded()).toBe("127\n");
  });
});
