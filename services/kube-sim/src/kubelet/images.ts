// The image map, two kinds of entry. A mount binds a host directory read-only into the
// containers of an image (`ephemera/agent` → services/io-agent/dist at /agent), so an
// image's files are what its containers find at the paths they expect, under either
// runtime. A stand-in names a local image the docker runtime runs instead of one that is
// neither here nor pullable (`ubuntu:24.04=debian:bookworm-slim`).
import { join, resolve } from "node:path";

export interface ImageMount {
  image: string;
  hostDir: string;
  mountPath: string;
  /**
   * Bound only where the image itself is not run: always in the process runtime, and in the
   * docker runtime when it runs the image's stand-in. The default agent mount is one: a
   * built ephemera/agent image runs with its own /agent.
   */
  standInOnly?: boolean;
}
export interface ImageStandIn { image: string; use: string }
export type ImageEntry = ImageMount | ImageStandIn;

/** The image the services run on (scripts/base-images.sh makes it where no registry serves one). */
export const NODE_IMAGE = "ephemera/node:20.20.2";

/**
 * Where the agent image is not built (or under the process runtime, which runs no image),
 * its containers see the built agent (services/io-agent/dist/agent.cjs) as /agent/agent.cjs,
 * on Node's image; a built ephemera/agent image runs as it is.
 */
export const defaultImageMap = (repoRoot: string): ImageEntry[] => [
  { image: "ephemera/agent", hostDir: join(repoRoot, "services/io-agent/dist"), mountPath: "/agent", standInOnly: true },
  { image: "ephemera/agent", use: NODE_IMAGE },
];

/**
 * `IMAGE=HOSTDIR:MOUNTPATH` (a mount: MOUNTPATH is absolute) or `IMAGE=LOCAL_IMAGE` (a
 * stand-in) entries separated by commas or semicolons (EPHEMERA_KUBE_SIM_IMAGES).
 */
export function parseImageMap(text: string): ImageEntry[] {
  return text.split(/[;,]/).map((s) => s.trim()).filter(Boolean).map((entry): ImageEntry => {
    const m = /^([^=]+)=(.+)$/.exec(entry);
    if (!m || !m[1]!.trim()) throw new Error(`EPHEMERA_KUBE_SIM_IMAGES entry "${entry}" is neither IMAGE=HOSTDIR:MOUNTPATH nor IMAGE=LOCAL_IMAGE`);
    const image = m[1]!.trim();
    const mount = /^(.+):(\/[^:]*)$/.exec(m[2]!.trim());
    return mount ? { image, hostDir: resolve(mount[1]!), mountPath: mount[2]! } : { image, use: m[2]!.trim() };
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

/** An entry names a repository (a glob, any tag) or, with a tag or digest, that one image. */
function matches(entry: string, image: string): boolean {
  return repository(entry) !== entry ? entry === image : globToRegExp(entry).test(repository(image));
}

export const isMount = (e: ImageEntry): e is ImageMount => "mountPath" in e;

export function mountsFor(image: string, map: ImageEntry[]): ImageMount[] {
  return map.filter(isMount).filter((m) => matches(m.image, image));
}

/** The first stand-in the map names for an image. */
export function standInFor(image: string, map: ImageEntry[]): string | undefined {
  return map.filter((e): e is ImageStandIn => !isMount(e)).find((e) => matches(e.image, image))?.use;
}
