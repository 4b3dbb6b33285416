// Pod capability tokens (job runner groups' pods): what verifies, and what is refused and why.
import { PermissionDeniedError, UnauthenticatedError } from "./errors.js";
import { signCapability, signPodCapability, signingKey, verifyPodCapability } from "./capability.js";

const KEY = signingKey(Buffer.alloc(32, 1));
const OTHER = signingKey(Buffer.alloc(32, 2));

describe("pod capability tokens", () => {
  it("name the group and the pod they were minted for", async () => {
    const token = await signPodCapability(KEY, { group: "builders", pod: "builders-1a2b" }, 60_000);
    await expect(verifyPodCapability([OTHER, KEY], token, "builders")).resolves.toEqual({ group: "builders", pod: "builders-1a2b" });
  });

  it("are refused for another group, past their expiry, with an unknown key, and a step's token is not one", async () => {
    const now = new Date("2030-01-01T00:00:00Z");
    const token = await signPodCapability(KEY, { group: "builders", pod: "p" }, 60_000, now);
    await expect(verifyPodCapability([KEY], token, "testers", now)).rejects.toThrow(PermissionDeniedError);
    await expect(verifyPodCapability([KEY], token, "builders", new Date(now.getTime() + 120_000))).rejects.toThrow("the pod token has expired");
    await expect(verifyPodCapability([OTHER], token, "builders", now)).rejects.toThrow(UnauthenticatedError);
    const step = await signCapability(KEY, { run: "builders/p", inputs: [], outputs: [] }, 60_000, now);
    await expect(verifyPodCapability([KEY], step, "builders", now)).rejects.toThrow("the pod token's aud claim is wrong");
    await expect(verifyPodCapability([KEY], "", "builders", now)).rejects.toThrow("no pod token");
  });
});
