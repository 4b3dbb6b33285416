// Loading the fixtures in services/spec/fixtures/ for the tests.
import { join } from "node:path";
import { isValidationError, type FieldViolation } from "@ephemera/kit";
import { loadTemplate } from "./template.js";

export const FIXTURES = join(__dirname, "..", "fixtures");

export const FIXTURE_SETS: Record<string, string[]> = {
  "orders-db/plugin.yaml": [],
  "vault-db/plugin.yaml": [],
  "sqs-queue/plugin.yaml": ["role-arn=arn:aws:iam::123456789012:role/sqs", "service-account=sqs-runner"],
  "sandboxes/feature.yaml": ["pr=42", "image=registry.example/orders:pr-42"],
  "upstream-format/plugin.yaml": [],
  "upstream-format/sandbox.yaml": ["pr=7", "cluster=local"],
  "jobs/runner-group.yaml": ["cluster=local"],
  "jobs/job.yaml": ["sandbox=feature-x"],
};

export function loadFixture(file: string): Promise<unknown> {
  return loadTemplate(join(FIXTURES, file), FIXTURE_SETS[file] ?? []);
}

/** The violations `fn` throws (fails the test when it does not throw a ValidationError). */
export function violationsOf(fn: () => unknown): FieldViolation[] {
  try {
    fn();
  } catch (err) {
    if (isValidationError(err)) return err.violations;
    throw err;
  }
  throw new Error("expected a ValidationError");
}

export function clone<T>(value: T): T {
  return structuredClone(value);
}
