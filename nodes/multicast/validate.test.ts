import { describe, expect, it } from "vitest";
import { DataPlaneError, isDataPlaneError } from "../../native/errors.js";
import { planChains } from "./blitzscale.js";
import { roleFor } from "./role.js";
import type { MulticastPlan } from "./schedule.js";
import { checkAddresses, validatePlan } from "./validate.js";

const base = (over: Partial<MulticastPlan>): MulticastPlan => ({
  algorithm: "chain",
  blockCount: 2,
  blockBytes: 8,
  totalBytes: 16,
  sources: ["s"],
  targets: ["a", "b"],
  transfers: [0, 1].flatMap((block) => [
    { from: "s", to: "a", block, step: block },
    { from: "a", to: "b", block, step: block + 1 },
  ]),
  steps: 3,
  ...over,
});

function reject(fn: () => unknown, reason: string, pattern: RegExp): DataPlaneError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(isDataPlaneError(caught), String(caught)).toBe(true);
  const err = caught as DataPlaneError;
  expect(err.reason).toBe(reason);
  expect(err.message).toMatch(pattern);
  return err;
}

describe("validatePlan: bad plans fail before any byte moves", () => {
  it("accepts a good chain", () => {
    expect(validatePlan(base({}))).toBeTruthy();
  });

  it("a cycle: a → b → a for a block the source never sends", () => {
    const plan = base({
      targets: ["a", "b", "c"],
      transfers: [
        { from: "s", to: "c", block: 0, step: 0 },
        { from: "s", to: "c", block: 1, step: 1 },
        { from: "a", to: "b", block: 0, step: 0 },
        { from: "b", to: "a", block: 0, step: 1 },
      ],
    });
    const err = reject(() => validatePlan(plan), "invalid_plan", /cycle in block 0: (a → b → a|b → a → b)/);
    expect(err.block).toBe(0);
  });

  it("a node listed twice (as two targets, or as source and target)", () => {
    reject(() => validatePlan(base({ targets: ["a", "b", "a"] })), "invalid_plan", /node a is listed twice/);
    reject(() => validatePlan(base({ sources: ["s"], targets: ["a", "s"] })), "invalid_plan", /node s is listed twice/);
  });

  it("zero blocks", () => {
    reject(() => validatePlan(base({ blockCount: 0, totalBytes: 0, transfers: [] })), "invalid_plan", /0 blocks/);
    const empty = planChains({ model: { totalBytes: 0, blockCount: 0 }, sources: [{ id: "s", outBytesPerS: 1 }], targets: [{ id: "a", inBytesPerS: 1 }] });
    reject(() => validatePlan(empty), "invalid_plan", /at least one block/);
  });

  it("a block size over a node's memory, and a model over memory", () => {
    const plan = base({ blockBytes: 1 << 20, totalBytes: 2 << 20 });
    const err = reject(() => validatePlan(plan, [{ id: "b", memoryBytes: 1000 }]), "over_memory", /node b: a block of 1048576 bytes is over its memory of 1000 bytes/);
    expect(err.peer).toBe("b");
    reject(() => validatePlan(plan, [{ id: "a", memoryBytes: (1 << 20) + 5 }]), "over_memory", /2097152 in all/);
  });

  it("an unreachable peer: a plan node with no data-plane address", () => {
    const err = reject(() => checkAddresses(base({}), { s: { host: "10.0.0.1", port: 5 }, a: { host: "10.0.0.2", port: 5 } }), "peer_unreachable", /node b has no data-plane address/);
    expect(err.peer).toBe("b");
    reject(() => roleFor(base({}), "a", { s: { host: "h", port: 1 }, a: { host: "h", port: 0 }, b: { host: "h", port: 3 } }, 1), "peer_unreachable", /node a/);
  });

  it("a block reaching a node twice, a send to a source, unknown nodes, a deadlocked order, a target left out", () => {
    reject(() => validatePlan(base({ transfers: [...base({}).transfers, { from: "s", to: "b", block: 1, step: 5 }] })), "invalid_plan", /block 1 reaches node b twice/);
    reject(() => validatePlan(base({ transfers: [...base({}).transfers, { from: "a", to: "s", block: 0, step: 5 }] })), "invalid_plan", /is a source/);
    reject(() => validatePlan(base({ transfers: [{ from: "s", to: "zz", block: 0, step: 0 }] })), "invalid_plan", /receiver zz is not in the plan/);
    // a must first forward block 1 (which only b gives it), b must first forward block 0 (which only a gives it)
    const deadlock = base({
      targets: ["a", "b", "c"],
      transfers: [
        { from: "s", to: "a", block: 0, step: 0 },
        { from: "s", to: "b", block: 1, step: 0 },
        { from: "a", to: "c", block: 1, step: 0 },
        { from: "a", to: "b", block: 0, step: 1 },
        { from: "b", to: "c", block: 0, step: 0 },
        { from: "b", to: "a", block: 1, step: 1 },
      ],
    });
    reject(() => validatePlan(deadlock), "invalid_plan", /deadlock: node a must forward block 1 to c before anything else/);
    reject(() => validatePlan(base({ transfers: base({}).transfers.slice(0, 3) })), "invalid_plan", /target b never receives block 1/);
  });
});
