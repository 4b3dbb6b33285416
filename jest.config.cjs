// Three tiers, told apart by file name: *.unit.spec.ts (no I/O), *.int.spec.ts (real NATS
// and Redis on this machine), *.e2e.spec.ts (the built stack and the eph CLI as processes).
const swc = ["@swc/jest", { jsc: { parser: { syntax: "typescript" }, target: "es2022" }, module: { type: "commonjs" } }];
const common = {
  transform: { "^.+\\.(t|j)s$": swc },
  // @kubernetes/client-node 1.x and its dependencies ship ES modules only: compiled like our own code.
  transformIgnorePatterns: ["/node_modules/(?!(\\.pnpm|@kubernetes/client-node|openid-client|oauth4webapi|jose)/)"],
  moduleNameMapper: {
    // A package's subpath export (`@ephemera/kit/client`) is its module of that name.
    "^@ephemera/([^/]+)/(.+)$": "<rootDir>/services/$1/src/$2.ts",
    "^@ephemera/(.*)$": "<rootDir>/services/$1/src/index.ts",
    "^(\\.{1,2}/.*)\\.js$": "$1",
  },
  testEnvironment: "node",
  rootDir: __dirname,
  // .ephemera/ holds what scripts make at run time (the images' staged packages, kubeconfigs):
  // never modules of the workspace, though the staged ones have the same package names.
  modulePathIgnorePatterns: ["<rootDir>/\\.ephemera/"],
};
module.exports = {
  projects: [
    { ...common, displayName: "unit", testMatch: ["<rootDir>/{services,test}/**/*.unit.spec.ts"] },
    { ...common, displayName: "integration", testMatch: ["<rootDir>/{services,test}/**/*.int.spec.ts"] },
    { ...common, displayName: "e2e", testMatch: ["<rootDir>/{services,test}/**/*.e2e.spec.ts"] },
    // *.faults.spec.ts: own NATS/Redis/services killed, restarted and flushed (~4 min); part of `pnpm test`, so CI runs it.
    { ...common, displayName: "faults", testMatch: ["<rootDir>/test/**/*.faults.spec.ts"] },
    // *.cluster.spec.ts: a three-node NATS cluster, kube-sim and two replicas of every service, a replica and a node
    // killed (`pnpm test:cluster`, about 2 minutes); part of `pnpm test`. Where nats-server cannot make a cluster it
    // says so in one line.
    { ...common, displayName: "cluster", testMatch: ["<rootDir>/test/cluster/**/*.cluster.spec.ts"] },
    // *.images.spec.ts: ephemera's images built with Docker and run as containers (`pnpm test:images`, a few
    // minutes the first time); part of `pnpm test`. Where Docker cannot run it says so in one line.
    { ...common, displayName: "images", testMatch: ["<rootDir>/test/images/**/*.images.spec.ts"] },
    // *.browser.spec.ts: the web console in Debian's chromium (scripts/ensure-chromium.sh installs it); part of
    // `pnpm test`. Where chromium cannot run it says so in one line.
    { ...common, displayName: "browser", testMatch: ["<rootDir>/test/browser/**/*.browser.spec.ts"] },
    // *.measure.ts: bounded measurements whose figures go to docs/performance.md (`pnpm test:outputs`);
    // listed only when asked for, so `pnpm test` never runs them.
    ...(process.env.EPHEMERA_MEASURE === "1" ? [{ ...common, displayName: "measure", testMatch: ["<rootDir>/test/load/**/*.measure.ts"] }] : []),
  ],
  testTimeout: 60000,
  // Two suites at a time even on two cores: the long ones (faults, blips, the stacks) mostly
  // wait on servers and steps, and every suite works under its own prefix or servers.
  maxWorkers: 2,
};
