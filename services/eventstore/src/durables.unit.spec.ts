import { differences } from "./durables.js";

describe("differences between a durable's config on the server and the declared one", () => {
  it("names each declared field held differently, absent ones included, and ignores what is not declared", () => {
    const held = { ack_wait: 60, max_deliver: 40, filter_subject: "a.>", subjects: ["a.>"], max_waiting: 512 };
    const declared = { ack_wait: 30, max_deliver: 40, filter_subject: "a.>", subjects: ["a.>", "b.>"], max_ack_pending: 1000, description: undefined };
    expect(differences(held, declared)).toEqual({
      ack_wait: { from: 60, to: 30 },
      subjects: { from: ["a.>"], to: ["a.>", "b.>"] },
      max_ack_pending: { from: undefined, to: 1000 },
    });
  });

  it("finds nothing when the server holds what is declared", () => {
    expect(differences({ ack_wait: 30, subjects: ["a.>"], extra: 1 }, { ack_wait: 30, subjects: ["a.>"] })).toEqual({});
  });
});
