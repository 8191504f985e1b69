import { describe, expect, it } from "vitest";
import { SimRequest } from "./request.js";
import { beyondSlots, preemptionVictims } from "./preemption.js";

const req = (id: string, priority: 0 | 1, tokens: number, arrivalMs: number) => new SimRequest(id, tokens / 2, tokens / 2, priority, arrivalMs, {});
const reserved = (r: SimRequest) => r.promptTokens + r.maxTokens;

describe("preemptionVictims (vLLM priority scheduling)", () => {
  it("takes the lower priority, latest arrival first, until the request fits (the file's example)", () => {
    const running = [req("a", 0, 400, 0), req("b", 1, 200, 1), req("c", 1, 150, 2)];
    const v = preemptionVictims(running, 0, { kvTokens: 300, kvFreeTokens: 100, slotsFree: 0 }, reserved);
    expect(v.map((r) => r.id)).toEqual(["c", "b"]);
  });

  it("nothing when it fits already, when only equal priorities run, or when all of the lower ones would not do", () => {
    const running = [req("a", 0, 600, 0), req("b", 1, 300, 1)];
    expect(preemptionVictims(running, 0, { kvTokens: 100, kvFreeTokens: 100, slotsFree: 1 }, reserved)).toEqual([]);
    expect(preemptionVictims(running, 1, { kvTokens: 200, kvFreeTokens: 100, slotsFree: 1 }, reserved)).toEqual([]);
    // freeing b gives 100 + 300 = 400 < 500: preempting it would be in vain
    expect(preemptionVictims(running, 0, { kvTokens: 500, kvFreeTokens: 100, slotsFree: 1 }, reserved)).toEqual([]);
  });

  it("a missing batch slot alone takes one victim; same arrival: the later admitted goes first", () => {
    const running = [req("b1", 1, 100, 5), req("b2", 1, 100, 5), req("i", 0, 100, 6)];
    const v = preemptionVictims(running, 0, { kvTokens: 100, kvFreeTokens: 10_000, slotsFree: 0 }, reserved);
    expect(v.map((r) => r.id)).toEqual(["b2"]);
  });

  it("beyondSlots: the lower-priority requests past the first `slots` by arrival, latest first (the file's example)", () => {
    const running = [req("a", 1, 10, 1), req("i", 0, 10, 0), req("b", 1, 10, 2), req("c", 1, 10, 3)];
    expect(beyondSlots(running, 0, 1).map((r) => r.id)).toEqual(["c", "b"]);
    expect(beyondSlots(running, 0, 3)).toEqual([]);
    expect(beyondSlots(running, 0, 0).map((r) => r.id)).toEqual(["c", "b", "a"]);
  });
});
