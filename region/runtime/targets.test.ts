/** The region's TargetsStore (targets.ts): the one decisionId rule, moved with the store from the gateway to the runtime. */
import { describe, expect, it } from "vitest";
import { TargetsStore } from "./targets.js";

describe("TargetsStore", () => {
  it("acks targets with a monotonic decisionId and tells listeners of new ones", () => {
    const store = new TargetsStore("us-east");
    const seen: number[] = [];
    store.onTargets((t) => seen.push(t.decisionId));
    const targets = (decisionId: number) => ({ decisionId, region: "us-east", madeAtMs: 0, advisory: false, endpoints: [] });
    expect(store.accept(targets(5))).toEqual({ region: "us-east", decisionId: 5, accepted: true });
    expect(store.accept(targets(4))).toEqual({ region: "us-east", decisionId: 5, accepted: false });
    expect(store.accept(targets(5))).toEqual({ region: "us-east", decisionId: 5, accepted: true });
    expect(store.accept(targets(7)).accepted).toBe(true);
    expect(seen).toEqual([5, 7]);
    expect(store.latest()?.decisionId).toBe(7);
    expect(() => store.accept({ ...targets(9), region: "us-west" })).toThrow(/us-west/);
  });

  it("advisory plans are acknowledged and held apart, never handed to listeners; the id still moves on", () => {
    const store = new TargetsStore("us-east");
    const seen: number[] = [];
    store.onTargets((t) => seen.push(t.decisionId));
    const targets = (decisionId: number, advisory = false) => ({ decisionId, region: "us-east", madeAtMs: 0, advisory, endpoints: [] });
    expect(store.accept(targets(3))).toEqual({ region: "us-east", decisionId: 3, accepted: true });
    expect(store.accept(targets(4, true))).toEqual({ region: "us-east", decisionId: 4, accepted: true });
    expect(store.latest()?.decisionId).toBe(3);
    expect(store.latestAdvisory()?.decisionId).toBe(4);
    expect(store.decisionId).toBe(4);
    // a plan older than the advisory one is stale, and the ack names the id held
    expect(store.accept(targets(4))).toEqual({ region: "us-east", decisionId: 4, accepted: true });
    expect(store.accept(targets(2))).toEqual({ region: "us-east", decisionId: 4, accepted: false });
    expect(store.accept(targets(5)).accepted).toBe(true);
    expect(store.latestAdvisory()).toBeUndefined();
    expect(seen).toEqual([3, 5]);
  });
});
