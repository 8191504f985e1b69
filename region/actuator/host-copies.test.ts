import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { silentLogger } from "../../core/log.js";
import { DEFAULT_MULTICAST } from "../pool/transfer.js";
import { HostCopies, type ModelSource } from "./host-copies.js";
import type { NodeRegistry } from "./nodes.js";

const source = (model: string): ModelSource => ({ model, totalBytes: 1000, blockCount: 4, origin: "pattern" });

describe("HostCopies.soleCopies", () => {
  it("counts the other hosted models whose only complete live copy is on the node", () => {
    const models = new Map(["m1", "m2", "m3", "m4"].map((m) => [m, source(m)]));
    const copies = new HostCopies({
      region: "r", clock: new VirtualClock(0), log: silentLogger, models, policy: DEFAULT_MULTICAST, minHostCopies: 1,
      nodes: {} as unknown as NodeRegistry, loadingOn: () => false, onBlock: () => undefined, fail: () => undefined,
    });
    for (const n of ["a", "b", "c"]) copies.pool.upsertNode(n, 1e9);
    copies.pool.setCopy("a", "m1", 1000, true, 0); // m1: only on a
    copies.pool.setCopy("a", "m2", 1000, true, 0); // m2: on a and b
    copies.pool.setCopy("b", "m2", 1000, true, 0);
    copies.pool.setCopy("a", "m3", 1000, false, 0); // m3: incomplete on a, complete on c
    copies.pool.setCopy("c", "m3", 1000, true, 0);
    copies.pool.setCopy("a", "m4", 1000, true, 0); // m4: only on a
    expect(copies.soleCopies("a", "m9")).toBe(2); // m1, m4
    expect(copies.soleCopies("a", "m1")).toBe(1); // the model asked for is not counted
    expect(copies.soleCopies("b", "m9")).toBe(0);
    expect(copies.soleCopies("c", "m9")).toBe(1); // m3
    copies.loseNode("b");
    expect(copies.soleCopies("a", "m9")).toBe(3); // b is gone: m2's copy on a is now its only one
  });
});
