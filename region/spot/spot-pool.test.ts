import { describe, expect, it } from "vitest";
import type { InstanceRecord } from "../actuator/port.js";
import { chooseScaleIn, chooseScaleOut } from "./spot-pool.js";

const inst = (id: string, model: string, state: InstanceRecord["state"], extra: Partial<InstanceRecord> = {}): InstanceRecord => ({ id, region: "r", gpu: "h100-80gb", gpus: 4, model, state, enteredAtMs: 0, ...extra });

describe("spot pool order", () => {
  it("reclaims same-model spot first, then another model's spot (a redeploy), then a fresh VM", () => {
    const world = [inst("a", "m1", "serving"), inst("b", "m2", "spot"), inst("c", "m1", "spot"), inst("d", "m2", "spot"), inst("e", "m3", "spot")];
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10)).toEqual({ kind: "reclaim", instanceId: "c" });
    const noSame = world.filter((i) => i.id !== "c");
    // m2 has two spot instances, m3 one: take from m2.
    expect(chooseScaleOut(noSame, "m1", "h100-80gb", 4, 0, 10)).toEqual({ kind: "redeploy", instanceId: "b", fromModel: "m2" });
    const noSpot = [inst("a", "m1", "serving")];
    expect(chooseScaleOut(noSpot, "m1", "h100-80gb", 4, 4, 10)).toEqual({ kind: "provision" });
    expect(chooseScaleOut(noSpot, "m1", "h100-80gb", 4, 3, 10)).toEqual({ kind: "none", reason: "no-capacity" });
  });

  it("redeploys a spot instance whose node already holds the model's blocks first (a host-cache hit), when the actuator can tell", () => {
    const world = [inst("a", "m1", "serving"), inst("b", "m2", "spot"), inst("d", "m2", "spot"), inst("e", "m3", "spot")];
    const cachedOnE = (id: string, model: string) => id === "e" && model === "m1";
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, cachedOnE)).toEqual({ kind: "redeploy", instanceId: "e", fromModel: "m3" });
    // no cache anywhere: the model with the most spot gives, as without the hint
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, () => false)).toEqual({ kind: "redeploy", instanceId: "b", fromModel: "m2" });
    // a cached spot of the wrong size is not taken
    expect(chooseScaleOut([inst("e", "m3", "spot", { gpus: 8 }), inst("b", "m2", "spot")], "m1", "h100-80gb", 4, 0, 10, (id) => id === "e")).toEqual({ kind: "redeploy", instanceId: "b", fromModel: "m2" });
  });

  it("without a host copy of the model, redeploys the spot instance whose node holds the fewest other models' only copies", () => {
    const world = [inst("a", "m1", "serving"), inst("b", "m2", "spot"), inst("d", "m2", "spot"), inst("e", "m3", "spot")];
    // b holds m4's only copy, d m5's and m6's, e none: e is given although m2 has more spot instances.
    const sole: Record<string, number> = { b: 1, d: 2, e: 0 };
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, () => false, (id) => sole[id]!)).toEqual({ kind: "redeploy", instanceId: "e", fromModel: "m3" });
    // a tie on sole copies falls back to the model with the most spot instances
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, () => false, () => 1)).toEqual({ kind: "redeploy", instanceId: "b", fromModel: "m2" });
    // a node holding the model's own copy still comes first, whatever else it holds
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, (id, m) => id === "d" && m === "m1", (id) => sole[id]!)).toEqual({ kind: "redeploy", instanceId: "d", fromModel: "m2" });
    // the model itself is not counted against a node
    const seen: string[] = [];
    chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, undefined, (_id, except) => (seen.push(except), 0));
    expect(new Set(seen)).toEqual(new Set(["m1"]));
  });

  it("among the model's own spot instances, reclaims the one whose node holds its blocks first", () => {
    const world = [inst("a", "m1", "spot"), inst("c", "m1", "spot"), inst("b", "m2", "spot")];
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, (id, m) => id === "c" && m === "m1")).toEqual({ kind: "reclaim", instanceId: "c" });
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10, () => false)).toEqual({ kind: "reclaim", instanceId: "a" });
  });

  it("never redeploys a spot instance whose GPU count does not fit the model", () => {
    const world = [inst("b", "m2", "spot", { gpus: 8 })];
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 0, 10)).toEqual({ kind: "none", reason: "no-capacity" });
  });

  it("holds max on scale-out and min on scale-in, counting deploying instances", () => {
    const world = [inst("a", "m1", "serving"), inst("b", "m1", "provisioning"), inst("c", "m1", "spot")];
    expect(chooseScaleOut(world, "m1", "h100-80gb", 4, 100, 2)).toEqual({ kind: "none", reason: "at-max" });
    expect(chooseScaleIn(world, "m1", "h100-80gb", 2, () => 0)).toEqual({ kind: "none", reason: "at-min" });
  });

  it("scale-in donates a deploying instance first, else the least loaded serving one", () => {
    const world = [inst("a", "m1", "serving"), inst("b", "m1", "serving"), inst("c", "m1", "loading", { readyAtMs: 5 })];
    expect(chooseScaleIn(world, "m1", "h100-80gb", 1, () => 0)).toEqual({ kind: "drain", instanceId: "c" });
    const serving = world.slice(0, 2);
    expect(chooseScaleIn(serving, "m1", "h100-80gb", 1, (id) => (id === "a" ? 500 : 10))).toEqual({ kind: "drain", instanceId: "b" });
  });
});
