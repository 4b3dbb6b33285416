import { judge, linkKey, type Answer, type Checked, type Strikes } from "./strikes.js";

const link = (answer: Answer, sessionId = "s1", local = "backend"): Checked => ({ routingKey: "rk1", local, sessionId, answer });
/** The lost links of each round in turn, the strikes carried from one round to the next. */
const rounds = (...answers: Checked[][]) => {
  let strikes: Strikes = new Map();
  return answers.map((round) => {
    const judged = judge(strikes, round, 2);
    strikes = judged.strikes;
    return judged.lost.map(linkKey);
  });
};

describe("the two-strikes rule of the tunnel health check", () => {
  it("loses a link at its second failed check in a row, whether the tunnel was unreachable or said the session is gone", () => {
    expect(rounds([link("unreachable")], [link("gone")])).toEqual([[], ["rk1/backend/s1"]]);
  });

  it("forgives one failure: an open answer between two failures starts the count again", () => {
    expect(rounds([link("unreachable")], [link("open")], [link("unreachable")], [link("open")])).toEqual([[], [], [], []]);
  });

  it("keeps counting a lost link that is still checked (its disconnect not yet written), so the next round tries again", () => {
    expect(rounds([link("gone")], [link("gone")], [link("gone")])).toEqual([[], ["rk1/backend/s1"], ["rk1/backend/s1"]]);
  });

  it("counts per session: a reconnect under a new session starts from nothing, and a link no longer checked is forgotten", () => {
    expect(rounds([link("gone", "s1")], [link("gone", "s2")], [link("gone", "s1")])).toEqual([[], [], []]);
  });

  it("counts each local on its own", () => {
    expect(rounds([link("gone", "s1", "a"), link("open", "s1", "b")], [link("gone", "s1", "a"), link("gone", "s1", "b")]))
      .toEqual([[], ["rk1/a/s1"]]);
  });
});
