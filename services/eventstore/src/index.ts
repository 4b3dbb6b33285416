export * from "./types.js";
export { InMemoryEventStore } from "./memory.js";
export { JetStreamEventStore, connectNats, eventSubject, eventStreamName } from "./jetstream.js";
export * from "./projection.js";
export * from "./workqueue.js";
export * from "./logs.js";
export { deadLetter, recordDeadLetter } from "./deadletter.js";
export { InMemoryValueStore, JetStreamValueStore, valuesBucket, type ValueStore } from "./values.js";
