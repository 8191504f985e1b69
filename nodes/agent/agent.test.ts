// Multi-process tests on loopback: every node is its own `tidegate agent` process, driven over gRPC.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isDataPlaneError } from "../../native/errors.js";
import { killRelayMidTransfer, spawnAll, stopAgents, type RunningAgent } from "../../test/netns/agents.js";
import { NOT_ABOUT_TIMING } from "../../test/native/harness.js";
import { planBinaryTree } from "../multicast/baselines.js";
import { planChains } from "../multicast/blitzscale.js";
import { planBinomial } from "../multicast/lambdascale.js";
import type { MulticastPlan } from "../multicast/schedule.js";

const MiB = 1 << 20;
let agents: RunningAgent[] = [];
const addrs = () => Object.fromEntries(agents.map((a) => [a.nodeId, a.data]));
let runId = 1;

async function runEverywhere(plan: MulticastPlan, model: string, seed: number, nodes = agents) {
  const id = runId++;
  await Promise.all(nodes.map((a) => a.client.load({ model, totalBytes: plan.totalBytes, blockCount: plan.blockCount, fill: plan.sources.includes(a.nodeId) ? "pattern" : "empty", seed })));
  return Promise.all(nodes.map((a) => a.client.run({ model, plan, runId: id, addresses: addrs(), stallMs: NOT_ABOUT_TIMING.stallMs, connectMs: NOT_ABOUT_TIMING.connectMs }).catch((e: unknown) => e as Error)));
}

beforeAll(async () => {
  agents = await spawnAll(["s", "a", "b", "c"].map((nodeId) => ({ nodeId, host: "127.0.0.1" })));
});
afterAll(async () => {
  await stopAgents(agents);
});

describe("tidegate agent over gRPC, one process per node (loopback)", () => {
  it("Info reports the node, its data port, and the TCP transport it was started with", async () => {
    const info = await agents[0]!.client.info();
    expect(info).toMatchObject({ nodeId: "s", dataHost: "127.0.0.1", dataPort: agents[0]!.data.port, transport: "tcp" });
    expect(info.memoryBytes).toBeGreaterThan(0);
  });

  for (const [name, plan] of [
    ["chain", planChains({ model: { totalBytes: 24 * MiB + 8, blockCount: 16 }, sources: [{ id: "s", outBytesPerS: 1 }], targets: ["a", "b", "c"].map((id) => ({ id, inBytesPerS: 1 })) })],
    ["binomial", planBinomial({ model: { totalBytes: 24 * MiB, blockCount: 16 }, sources: ["s"], targets: ["a", "b", "c"] })],
    ["tree", planBinaryTree({ model: { totalBytes: 8 * MiB, blockCount: 8 }, source: "s", targets: ["a", "b", "c"] })],
  ] as const) {
    it(`${name}: every target holds the exact model; arrivals stream back per block`, async () => {
      const results = await runEverywhere(plan, `m-${name}`, 77);
      for (const r of results) if (r instanceof Error) throw r;
      for (const a of agents.slice(1)) {
        expect(await a.client.verify(`m-${name}`, 77)).toEqual({ firstMismatch: -1, present: plan.blockCount });
        const r = results[agents.indexOf(a)] as { arrivals: unknown[] };
        expect(r.arrivals).toHaveLength(plan.blockCount);
      }
    });
  }

  it("a plan with a cycle is refused before any byte moves", async () => {
    const plan: MulticastPlan = {
      algorithm: "chain",
      blockCount: 1,
      blockBytes: 8,
      totalBytes: 8,
      sources: ["s"],
      targets: ["a", "b"],
      steps: 2,
      transfers: [
        { from: "a", to: "b", block: 0, step: 0 },
        { from: "b", to: "a", block: 0, step: 1 },
      ],
    };
    await agents[1]!.client.load({ model: "cyc", totalBytes: 8, blockCount: 1, fill: "empty" });
    const err = await agents[1]!.client.run({ model: "cyc", plan, runId: runId++, addresses: addrs() }).catch((e: unknown) => e);
    expect(isDataPlaneError(err, "invalid_plan"), String(err)).toBe(true);
    expect((err as Error).message).toMatch(/cycle in block 0/);
    expect(await agents[1]!.client.verify("cyc", 0)).toMatchObject({ present: 0 });
  });

  it("a malformed plan is an invalid_request naming the field", async () => {
    await agents[1]!.client.load({ model: "bad", totalBytes: 8, blockCount: 1, fill: "empty" });
    const plan = { algorithm: "chain", blockCount: "x" } as unknown as MulticastPlan;
    const err = (await agents[1]!.client.run({ model: "bad", plan, runId: runId++, addresses: addrs() }).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/plan\.blockCount/);
  });

  it("a peer killed mid-transfer fails its neighbours quickly, naming it", async () => {
    const { killedAt, timerLateMs, source, tail, tries } = await killRelayMidTransfer({ totalBytes: 192 * MiB, blockCount: 64, runId: runId++ });
    expect(killedAt).toBeGreaterThan(0);
    for (const r of [source, tail]) {
      expect(isDataPlaneError(r.err), `${String(r.err)} (try ${tries}: the kill landed after the transfer ended in every try)`).toBe(true);
      expect(r.err!.message).toMatch(/peer k1 \(127\.0\.0\.1:\d+\)/);
      // A killed peer's sockets close at once (no stall timer is involved): 1 s, plus however late a 1 s timer
      // started at the kill fired in this process (a busy machine delays the kill's report here, not the detection).
      expect(r.at - killedAt, `a 1 s timer fired ${timerLateMs.toFixed(0)} ms late meanwhile`).toBeLessThan(1000 + timerLateMs);
    }
  });
});
