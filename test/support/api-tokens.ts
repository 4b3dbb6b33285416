// Bearer tokens for tests of the guarded API: one per role, in a tokens file written as an
// operator writes one (hashes only), and the API access it configures.
import { createHash, randomBytes } from "node:crypto";
import { apiAccess, type ApiAccess } from "../../services/sandbox/src/auth/access.js";
import { parseTokensFile } from "../../services/sandbox/src/auth/tokens.js";

/** Fresh tokens for each run: names are the roles prefixed `test-`. */
export const TOKENS = {
  viewer: `v-${randomBytes(16).toString("hex")}`,
  editor: `e-${randomBytes(16).toString("hex")}`,
  admin: `a-${randomBytes(16).toString("hex")}`,
} as const;

const sha256 = (token: string) => createHash("sha256").update(token).digest("hex");

/** The tokens file's text: `test-viewer`, `test-editor` and `test-admin`. */
export function tokensFile(): string {
  return `tokens:\n${Object.entries(TOKENS).map(([role, token]) => `  - {name: test-${role}, role: ${role}, sha256: ${sha256(token)}}`).join("\n")}\n`;
}

export function tokensAccess(): ApiAccess {
  return apiAccess({ tokens: parseTokensFile(tokensFile(), "test tokens") })!;
}
