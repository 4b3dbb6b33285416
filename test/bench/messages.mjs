// What a step costs in NATS messages, by kind: a batch of the four-step plugin on a fresh
// stack (own NATS, Redis and services) with a connection of the bench's own subscribed to
// every subject, counting what it sees per step: each append by aggregate, each delivery of a
// commit to a consumer (by consumer), acks, reads, KV and object store traffic, the work
// queue, logs, and the replies to requests. A message a service sends and one the server
// delivers are both counted; the server's CPU and each service's follow the count.
//   node test/bench/messages.mjs [count]     (after pnpm build)
import { mkdtempSync, rmSync } from "node:fs";
import { connectNats } from "../../services/eventstore/dist/index.js";
import { runBatch } from "./batch.mjs";
import { startServers, stopAll } from "./system.mjs";

/** A name the server or a client made up (an inbox's) reads as `*`. */
const generated = (token) => /^[A-Za-z0-9]{16,}$/.test(token) && /[0-9]/.test(token);
/** A consumer as its ack subject names it: an ordered consumer's name is nats.js's `<nuid>_<serial>`; a durable's `<prefix>_<name>`. */
const consumerOf = (name) => (/^[A-Za-z0-9]{16,}_\d+$/.test(name) ? "(ordered consumer)" : name.replace(/^[^_]*_/, ""));

/** The kind of message a subject and reply subject (and a stream read's request) say it is. */
export function kindOf(subject, reply, data) {
  const t = subject.split(".");
  if (subject.startsWith("_INBOX.")) return "reply to a request";
  if (subject.startsWith("$JS.API.STREAM.MSG.GET.") && data) return `stream read: ${readOf(data)}`;
  if (subject.startsWith("$JS.ACK.")) return `ack → ${consumerOf(t[3])}`;
  if (subject.startsWith("$JS.API.")) return `JetStream API ${t.slice(2, t[2] === "CONSUMER" && t[3] === "MSG" ? 5 : 4).join(".")}`;
  if (subject.startsWith("$KV.")) return `KV ${t[1].replace(/^[^_]*_/, "")}${reply?.startsWith("$JS.ACK") ? " (delivered)" : ""}`;
  if (subject.startsWith("$O.")) return `object store ${t[2] === "C" ? "chunk" : "meta"}${reply?.startsWith("$JS.ACK") ? " (delivered)" : ""}`;
  if (subject.startsWith("$JS.EVENT.")) return "JetStream advisory";
  const ev = t.indexOf("ev");
  if (ev === 1) {
    const aggregate = t[2];
    if (!reply) return `${aggregate} (no reply)`;
    if (reply.startsWith("$JS.ACK.")) {
      const consumer = reply.split(".")[3];
      return `delivered: ${aggregate} → ${consumerOf(consumer)}`;
    }
    return `append: ${aggregate}`;
  }
  if (t[1] === "run") return reply?.startsWith("$JS.ACK") ? `work queue delivered (${t[2]})` : `work queue publish (${t[2]})`;
  if (t[1] === "log") return reply?.startsWith("$JS.ACK") ? "log delivered" : "log append";
  if (t[1] === "cancel") return "cancel";
  return t.map((x) => (generated(x) ? "*" : x)).join(".");
}

/** A stream read by what it asks for: an aggregate's last commit, or the one after a sequence. */
function readOf(data) {
  try {
    const q = JSON.parse(Buffer.from(data).toString());
    const subject = q.last_by_subj ?? q.next_by_subj ?? "";
    const t = subject.split(".");
    return `${t.indexOf("ev") === 1 ? t[2] : t.slice(0, 2).join(".")} (${q.last_by_subj ? "last" : q.next_by_subj ? "next" : "by sequence"})`;
  } catch {
    return "(not JSON)";
  }
}

if (process.argv[1] === new URL(import.meta.url).pathname) {
  const count = Number(process.argv[2] ?? 50);
  const scratch = mkdtempSync("/var/tmp/ephemera-bench-messages-");
  try {
    const servers = await startServers(`${scratch}/servers`);
    const tap = await connectNats(servers.natsUrl, "bench-messages");
    const counts = new Map();
    // Requests by who made them: a request's reply subject is its connection's inbox, `_INBOX.<nuid>.<id>`.
    const asked = new Map();
    const add = (map, k, n = 1) => map.set(k, (map.get(k) ?? 0) + n);
    const print = (map) => {
      for (const [k, n] of [...map].sort((x, y) => y[1] - x[1])) if (n / b.steps >= 0.05) process.stdout.write(`${(n / b.steps).toFixed(2).padStart(8)}  ${k}\n`);
    };
    tap.subscribe(">", { callback: (_err, m) => {
      const k = kindOf(m.subject, m.reply, m.data);
      add(counts, k);
      if (m.reply?.startsWith("_INBOX.")) add(asked, `${m.reply.split(".")[1]} ${k}`);
    } });
    // Each connection's name and inbox, from the server's monitor while the services are up.
    const inboxes = new Map();
    const learn = async () => {
      const { connections = [] } = await (await fetch(`${servers.natsMonitorUrl}/connz?subs=1&limit=4096`)).json();
      for (const c of connections) for (const s of c.subscriptions_list ?? []) if (s.startsWith("_INBOX.")) inboxes.set(s.split(".")[1], c.name ?? `cid ${c.cid}`);
    };
    const learning = setInterval(() => void learn().catch(() => undefined), 500);
    let b;
    try {
      b = await runBatch({ servers, scratch, count });
    } finally {
      clearInterval(learning);
    }
    await tap.flush();
    await tap.close();
    const total = [...counts.values()].reduce((a, n) => a + n, 0);
    process.stdout.write(`${count} sandboxes × 4 steps: ${(total / b.steps).toFixed(1)} messages per step seen on every subject ` +
      `(the server's own count: in ${(b.nats.in / b.steps).toFixed(1)}, out ${(b.nats.out / b.steps).toFixed(1)}); by kind, per step:\n`);
    print(counts);
    const byAsker = new Map();
    for (const [k, n] of asked) {
      const [inbox, ...kind] = k.split(" ");
      const who = (inboxes.get(inbox) ?? "(a connection not seen)").replace(/-[0-9a-f]{6,}$/i, "");
      add(byAsker, `${who}: ${kind.join(" ")}`, n);
    }
    process.stdout.write("requests by who asked, per step:\n");
    print(byAsker);
  } finally {
    await stopAll();
    rmSync(scratch, { recursive: true, force: true });
  }
}
