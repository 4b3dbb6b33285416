// The kubeconfig clients use to reach the simulator: plain http (so no certificate to
// verify), one cluster, user and
// context named kube-sim, a dummy token (the simulator checks none).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export const CONTEXT = "kube-sim";

export function kubeconfigYaml(url: string, namespace = "default"): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `- name: ${CONTEXT}`,
    "  cluster:",
    `    server: ${url}`,
    // client-node refuses plain http unless told that no certificate is to be checked.
    "    insecure-skip-tls-verify: true",
    "users:",
    `- name: ${CONTEXT}`,
    "  user:",
    "    token: kube-sim-token",
    "contexts:",
    `- name: ${CONTEXT}`,
    "  context:",
    `    cluster: ${CONTEXT}`,
    `    user: ${CONTEXT}`,
    `    namespace: ${namespace}`,
    `current-context: ${CONTEXT}`,
    "",
  ].join("\n");
}

export function writeKubeconfig(path: string, url: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, kubeconfigYaml(url), { mode: 0o600 });
}
