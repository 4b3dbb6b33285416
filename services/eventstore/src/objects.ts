// The Object Store, as the output journal and the projections' snapshots use it. Every
// object written or read is hashed (SHA-256) on the way, and @nats-io/obj hashes in
// JavaScript unless told otherwise (its default works in browsers): 22–24 ms per MiB on
// the project's machine, against 0.7–1 ms for its "native" backend, node:crypto. A
// snapshot of a service's projections (megabytes at a thousand sandboxes) was hashed on
// the event loop once every 1,000 commits; a 1 MiB output at every put and read. The
// backend is process-wide: chosen here, before any bucket is opened.
import { setSha256Backend } from "@nats-io/obj";

setSha256Backend("native");

export { Objm, getSha256Backend, type ObjectStore } from "@nats-io/obj";
