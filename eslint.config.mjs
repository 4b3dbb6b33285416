import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "services/proto/src/gen/**", "services/kube-sim/src/gen/**", "node_modules/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Plain Node scripts (benchmarks, code generation).
    files: ["**/*.mjs"],
    languageOptions: {
      globals: {
        process: "readonly", Buffer: "readonly", console: "readonly", setTimeout: "readonly", clearTimeout: "readonly",
        setInterval: "readonly", clearInterval: "readonly", performance: "readonly", AbortController: "readonly", AbortSignal: "readonly", URL: "readonly", fetch: "readonly",
      },
    },
  },
  {
    // The console's single-page app (services/console/web, .tsx) is typed by its own tsconfig, found by the project service.
    files: ["**/*.ts", "**/*.tsx"],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
);
