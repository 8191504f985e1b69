// Multi-host tests: every node is a `tidegate agent` in its own network namespace, links shaped with tc tbf.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isDataPlaneError } from "../../native/errors.js";
import type { RunResult } from "../../native/index.js";
import { planChains } from "../../nodes/multicast/blitzscale.js";
import { planBinomial } from "../../nodes/multicast/lambdascale.js";
import type { MulticastPlan } from "../../nodes/multicast/schedule.js";
import { spawnAgent, spawnAll, stopAgents, type RunningAgent } from "./agents.js";
import { corruptingProxy } from "./proxy.js";
import { createTopology, netnsUnavailable, type Topology } from "./topology.js";

const MiB = 1 << 20;
const RATE_MBIT = 400;
const why = netnsUnavailable();
if (why !== undefined) console.log(`netns multicast tests not run: ${why}`);
else
  describe("multicast across network namespaces (veth + bridge + tbf)", () => {
    let topo: Topology | undefined;
    let runId = 100;
    let agents: RunningAgent[] = [];
    beforeAll(async () => {
      topo = createTopology([RATE_MBIT, RATE_MBIT, RATE_MBIT, RATE_MBIT, RATE_MBIT]);
      agents = await spawnAll(topo.nodes.map((n) => ({ nodeId: n.name, ns: n.ns, host: n.ip })));
    });
    afterAll(async () => {
      try {
        await stopAgents(agents);
      } finally {
        topo?.destroy();
      }
    });

    // Runs fn with the agents; a test that kills or stops agent i gets a fresh one afterwards.
    async function withAgents(fn: (agents: RunningAgent[]) => Promise<void>, victim?: number): Promise<void> {
      try {
        await fn(agents);
      } finally {
        if (victim !== undefined) {
          const old = agents[victim]!;
          old.proc.kill("SIGKILL");
          await stopAgents([old]);
          const n = topo!.nodes[victim]!;
          agents[victim] = await spawnAgent({ nodeId: n.name, ns: n.ns, host: n.ip });
        }
      }
    }

    type Outcome = { result?: RunResult; err?: Error; at: number };
    function runAll(agents: RunningAgent[], plan: MulticastPlan, model: string, seed: number, addressOverride: Record<string, { host: string; port: number }> = {}, onBlock?: (node: string, block: number) => void): Promise<Outcome[]> {
      const id = runId++;
      const addrs = Object.fromEntries(agents.map((a) => [a.nodeId, a.data]));
      return Promise.all(
        agents.map(async (a) => {
          await a.client.load({ model, totalBytes: plan.totalBytes, blockCount: plan.blockCount, fill: plan.sources.includes(a.nodeId) ? "pattern" : "empty", seed });
          return a.client
            .run({ model, plan, runId: id, addresses: { ...addrs, ...(a.nodeId === "n0" ? addressOverride : {}) } }, (arr) => onBlock?.(a.nodeId, arr.block))
            .then(
              (result) => ({ result, at: performance.now() }),
              (err: unknown) => ({ err: err as Error, at: performance.now() }),
            );
        }),
      );
    }

    it("chain and binomial plans deliver the exact model to every node at the shaped rate", async () => {
      await withAgents(async (agents) => {
        const model = { totalBytes: 16 * MiB, blockCount: 16 };
        const targets = ["n1", "n2", "n3", "n4"];
        const fullS = (model.totalBytes * 8) / (RATE_MBIT * 1e6);
        for (const plan of [planChains({ model, sources: [{ id: "n0", outBytesPerS: 1 }], targets: targets.map((id) => ({ id, inBytesPerS: 1 })) }), planBinomial({ model, sources: ["n0"], targets })]) {
          const out = await runAll(agents, plan, plan.algorithm, 5);
          for (const o of out) if (o.err) throw o.err;
          for (const a of agents.slice(1)) expect(await a.client.verify(plan.algorithm, 5)).toEqual({ firstMismatch: -1, present: 16 });
          // the links really are shaped: no receiver can have the whole model faster than M/B
          for (const o of out.slice(1)) expect(Math.max(...o.result!.arrivals.map((x) => x.atMs)) / 1000).toBeGreaterThan(0.9 * fullS);
        }
      });
    });

    it("a peer killed mid-transfer: its upstream and downstream fail within 1 s, naming it", async () => {
      await withAgents(async (agents) => {
        const plan = planChains({ model: { totalBytes: 32 * MiB, blockCount: 32 }, sources: [{ id: "n0", outBytesPerS: 1 }], targets: ["n1", "n2", "n3"].map((id) => ({ id, inBytesPerS: 1 })) });
        let killedAt = 0;
        const out = await runAll(agents.slice(0, 4), plan, "kill", 3, {}, (node, block) => {
          if (node === "n3" && block === 2 && killedAt === 0) {
            killedAt = performance.now();
            agents[2]!.proc.kill("SIGKILL");
          }
        });
        expect(killedAt).toBeGreaterThan(0);
        for (const i of [1, 3]) {
          const o = out[i]!;
          expect(isDataPlaneError(o.err), `n${i}: ${String(o.err)}`).toBe(true);
          expect(o.err!.message).toMatch(new RegExp(`peer n2 \\(${topo!.nodes[2]!.ip.replace(/\./g, "\\.")}:\\d+\\)`));
          expect(o.at - killedAt).toBeLessThan(1000);
        }
      }, 2);
    });

    it("a stalled peer (SIGSTOP): its neighbours fail within about 1 s, naming it", async () => {
      await withAgents(async (agents) => {
        const plan = planChains({ model: { totalBytes: 32 * MiB, blockCount: 32 }, sources: [{ id: "n0", outBytesPerS: 1 }], targets: ["n1", "n2", "n3"].map((id) => ({ id, inBytesPerS: 1 })) });
        let stoppedAt = 0;
        const out = await runAll(agents.slice(0, 4), plan, "stall", 3, {}, (node, block) => {
          if (node === "n3" && block === 2 && stoppedAt === 0) {
            stoppedAt = performance.now();
            agents[2]!.proc.kill("SIGSTOP");
            // resume it once its neighbours had time to give up, so its own call ends too
            setTimeout(() => agents[2]!.proc.kill("SIGCONT"), 2500);
          }
        });
        for (const i of [1, 3]) {
          const o = out[i]!;
          expect(isDataPlaneError(o.err), `n${i}: ${String(o.err)}`).toBe(true);
          expect(o.err!.message).toMatch(/peer n2 .*(stalled|closed|failed)/);
          expect(o.at - stoppedAt).toBeLessThan(1600);
        }
        expect(out.some((o) => isDataPlaneError(o.err, "peer_stalled"))).toBe(true);
      }, 2);
    });

    it("a block corrupted on the wire is rejected by its receiver, naming the block and the sender", async () => {
      await withAgents(async (agents) => {
        const plan = planChains({ model: { totalBytes: 8 * MiB, blockCount: 8 }, sources: [{ id: "n0", outBytesPerS: 1 }], targets: ["n1"].map((id) => ({ id, inBytesPerS: 1 })) });
        // n0 dials n1 through a relay on the bridge that flips byte 3 MiB of the stream: inside block 3's payload
        const proxy = await corruptingProxy(topo!.hostIp, agents[1]!.data, 3 * MiB + 64 + 3 * 32 + 5000);
        try {
          const out = await runAll(agents.slice(0, 2), plan, "corrupt", 9, { n1: { host: topo!.hostIp, port: proxy.port } });
          const err = out[1]!.err;
          expect(isDataPlaneError(err, "checksum_mismatch"), String(err)).toBe(true);
          expect(err).toMatchObject({ peer: "n0", block: 3 });
          const v = await agents[1]!.client.verify("corrupt", 9);
          expect(v.present).toBe(3);
        } finally {
          await proxy.close();
        }
      });
    });
  });
