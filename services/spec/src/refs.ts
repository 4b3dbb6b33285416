// Plugin references: "name", "name@1.2.3", "name@latest". Versions are semver, stored in
// canonical form ("v1.2" and "1.2" both mean "1.2.0", as upstream accepts them).
import { ValidationError } from "@ephemera/kit/errors";
import semver from "semver";
import { byteLength, LABEL_NAME, MAX_BYTES } from "./names.js";
import type { Rule } from "./violations.js";

export interface PluginRef {
  name: string;
  /** Canonical semver; undefined for a bare name and for "@latest". */
  version?: string;
  /** True only for an explicit "@latest". */
  latest: boolean;
}

export interface RefProblem {
  rule: Rule;
  message: string;
}

const SHORT_VERSION = /^v?(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?$/;

/** The canonical form of a version, or undefined when it is not semver. */
export function canonicalVersion(text: string): string | undefined {
  // Build metadata would make two spellings of one version slot.
  if (text.includes("+") || /\s/.test(text)) return undefined;
  const full = semver.valid(text);
  if (full !== null && /^v?[0-9]/.test(text)) return full;
  const short = SHORT_VERSION.exec(text);
  if (!short) return undefined;
  return `${short[1]}.${short[3] ?? "0"}.0`;
}

/** Every problem of a reference; empty when it parses. */
export function pluginRefProblems(ref: string): RefProblem[] {
  const at = ref.indexOf("@");
  const name = at < 0 ? ref : ref.slice(0, at);
  const problems: RefProblem[] = [];
  if (!LABEL_NAME.test(name)) {
    problems.push({
      rule: "name-format",
      message: `plugin name "${name}" must start with a letter, contain only letters, digits and '-', and end with a letter or digit`,
    });
  }
  if (byteLength(name) > MAX_BYTES.pluginName) {
    problems.push({ rule: "too-long", message: `plugin name is longer than ${MAX_BYTES.pluginName} bytes` });
  }
  if (at >= 0) {
    const version = ref.slice(at + 1);
    if (version !== "latest" && canonicalVersion(version) === undefined) {
      problems.push({
        rule: "version-format",
        message: `version "${version}" is not semver (use name@1.2.3, or name@latest when referencing)`,
      });
    }
  }
  return problems;
}

export function parsePluginRef(ref: string): PluginRef {
  const problems = pluginRefProblems(ref);
  if (problems.length > 0) {
    throw new ValidationError(
      problems.map((p) => ({ field: "name", description: p.message, rule: p.rule })),
      "invalid plugin reference",
    );
  }
  const at = ref.indexOf("@");
  if (at < 0) return { name: ref, latest: false };
  const version = ref.slice(at + 1);
  if (version === "latest") return { name: ref.slice(0, at), latest: true };
  return { name: ref.slice(0, at), version: canonicalVersion(version), latest: false };
}
