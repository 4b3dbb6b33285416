// A realistic history under one prefix, written by ephemera's own services (never by
// hand-made JSON that would drift from what they write): `deleted` sandboxes of a plugin
// whose workflows have no steps (created, provisioned, ready, deleting, deprovisioned,
// deleted; the workflows' events and the IO context's drops of their outputs), then `ran`
// sandboxes of the four-step plugin (their step runs' events, outputs and logs too),
// created, ready and deleted. The stack is stopped when the history is made, so the
// prefix is what a restart of any service finds.
import { jetstreamManager } from "@nats-io/jetstream";
import { Api } from "../../services/cli/dist/api.js";
import { connectNats, eventStreamName } from "../../services/eventstore/dist/index.js";
import { plugin, fourStepPlugin, sandbox } from "./workloads.mjs";
import { startStack } from "./system.mjs";

/** No create or delete step: the workflows end at once, so a sandbox's history costs no runner time. */
export const emptyPlugin = () => plugin("nosteps", []);

/**
 * One follow of the API's sandbox events: counts each name's ready, failure and deleted,
 * so a creator can wait for one name's ready and the maker for all deletions.
 */
function sandboxEvents(api) {
  const ready = new Set();
  const deleted = new Set();
  const failed = new Map();
  const controller = new AbortController();
  const ended = api.watchEvents({ follow: true, sandbox: "", typeGlob: "ephemera.sandbox.*" }, (record) => {
    const e = JSON.parse(record.json);
    if (e.type === "ephemera.sandbox.ready.v1") ready.add(e.subject);
    else if (e.type === "ephemera.sandbox.deleted.v1") deleted.add(e.subject);
    else if (e.type === "ephemera.sandbox.resource_provision_failed.v1") failed.set(e.subject, JSON.stringify(e.data).slice(0, 300));
  }, { signal: controller.signal }).catch(() => "aborted");
  const until = async (test, what, timeoutMs) => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const [name, why] = failed.entries().next().value ?? [];
      if (name) throw new Error(`sandbox ${name} failed: ${why}`);
      if (test()) return;
      if (Date.now() > end) throw new Error(`${what} not seen within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return {
    ready: (name, timeoutMs) => until(() => ready.has(name), `ready of ${name}`, timeoutMs),
    allDeleted: (names, timeoutMs) => until(() => names.every((n) => deleted.has(n)), `deletion of ${names.length} sandboxes`, timeoutMs),
    async stop() {
      controller.abort();
      await ended;
    },
  };
}

/** Each of `names` created (of `pluginName`), waited ready and deleted, `inFlight` at a time; resolves once every one is deleted. */
async function lifecycle(api, events, names, pluginName, inFlight, timeoutMs) {
  let next = 0;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next < names.length) {
      const name = names[next++];
      await api.applySandbox(sandbox(name, pluginName));
      await events.ready(name, timeoutMs);
      await api.deleteSandbox(name, false);
    }
  }));
  await events.allDeleted(names, timeoutMs);
}

/**
 * Makes the history on a fresh stack and stops it; resolves to its prefix, how long each
 * part took and how many commits the event stream holds.
 */
export async function makeHistory({ natsUrl, redisUrl, scratch, deleted, ran, log = () => {} }) {
  const stack = await startStack({ natsUrl, redisUrl, scratch, tag: "hist" });
  const api = new Api(stack.api, { timeoutMs: 60_000 });
  const events = sandboxEvents(api);
  let t, deletedMs, ranMs;
  try {
    await api.applyPlugin(emptyPlugin());
    await api.applyPlugin(fourStepPlugin());
    t = performance.now();
    await lifecycle(api, events, Array.from({ length: deleted }, (_, i) => `gone-${i}`), "nosteps", 32, 10 * 60_000);
    deletedMs = performance.now() - t;
    log(`history: ${deleted} sandboxes created and deleted in ${(deletedMs / 1000).toFixed(1)} s`);
    t = performance.now();
    await lifecycle(api, events, Array.from({ length: ran }, (_, i) => `ran-${i}`), "fourstep", 16, 10 * 60_000);
    ranMs = performance.now() - t;
    log(`history: ${ran} four-step sandboxes ran and deleted in ${(ranMs / 1000).toFixed(1)} s`);
  } finally {
    await events.stop();
    api.close();
    await stack.stop();
  }
  const { messages, bytes } = await eventStreamState(natsUrl, stack.prefix);
  return { prefix: stack.prefix, deletedMs, ranMs, commits: messages, bytes };
}

/** The prefix's event stream: its commits (messages) and their bytes on the server. */
export async function eventStreamState(natsUrl, prefix) {
  const nc = await connectNats(natsUrl, "bench-history");
  try {
    const jsm = await jetstreamManager(nc);
    const { state } = await jsm.streams.info(eventStreamName(prefix));
    return { messages: state.messages, bytes: state.bytes };
  } finally {
    await nc.close();
  }
}
