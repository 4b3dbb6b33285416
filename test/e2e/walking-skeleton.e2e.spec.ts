// The whole path of ephemera, as a user drives it, with the process driver (the default).
import { startTestStack, type TestStack } from "../support/stack.js";
import { endToEndScenarios } from "./scenarios.js";

describe("ephemera end to end (process driver)", () => {
  let stack: TestStack;
  beforeAll(async () => { stack = await startTestStack(); }, 60_000);
  afterAll(async () => { await stack?.stop(); });
  endToEndScenarios(() => stack);
});
