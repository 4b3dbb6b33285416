// The image map: images are never pulled; instead a host directory can be bound read-only
// into the containers of an image (`ephemera/agent` → services/io-agent/dist at /agent),
// so an image's files are what its containers find at the paths they expect.
import { join, resolve } from "node:path";

export interface ImageMount { image: string; hostDir: string; mountPath: string }

/** The agent image sees the built agent (services/io-agent/dist/agent.cjs) as /agent/agent.cjs. */
export const defaultImageMap = (repoRoot: string): ImageMount[] => [
  { image: "ephemera/agent", hostDir: join(repoRoot, "services/io-agent/dist"), mountPath: "/agent" },
];

/** `IMAGE=HOSTDIR:MOUNTPATH` entries separated by commas or semicolons (EPHEMERA_KUBE_SIM_IMAGES). */
export function parseImageMap(text: string): ImageMount[] {
  return text.split(/[;,]/).map((s) => s.trim()).filter(Boolean).map((entry) => {
    const m = /^([^=]+)=(.+):([^:]+)$/.exec(entry);
    if (!m) throw new Error(`image map entry "${entry}" is not IMAGE=HOSTDIR:MOUNTPATH`);
    return { image: m[1]!.trim(), hostDir: resolve(m[2]!), mountPath: m[3]! };
  });
}

/** The repository of an image reference, without tag or digest. */
export function repository(image: string): string {
  const noDigest = image.split("@")[0]!;
  const slash = noDigest.lastIndexOf("/");
  const colon = noDigest.lastIndexOf(":");
  return colon > slash ? noDigest.slice(0, colon) : noDigest;
}

const globToRegExp = (glob: string) => new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`);

export function mountsFor(image: string, map: ImageMount[]): ImageMount[] {
  const repo = repository(image);
  return map.filter((m) => globToRegExp(m.image).test(repo));
}
