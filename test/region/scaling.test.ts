// A running region scales (real processes on loopback): `tidegate global`, one `tidegate region` in agents mode,
// `tidegate agent`s announcing themselves to it, engine-sim engines started by the agents once their model's
// blocks arrived over the native data plane. Targets go to the region over gRPC as the planner sends them.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stopAll } from "../e2e/procs.js";
import { ADMIN_KEY, Cluster, processesWith, waitFor } from "./cluster.js";

const MiB = 1 << 20;
const A = "llama3.2-3b";
const B = "llama3.1-8b";
const GPU = "h100-80gb";
let dir: string;
let c: Cluster;
let client: OpenAI;

function config() {
  return {
    models: [
      { name: A, gpusPerInstance: { [GPU]: 2 } },
      { name: B, gpusPerInstance: { [GPU]: 2 } },
    ],
    regions: [
      {
        name: "r1",
        gpus: [{ type: GPU, count: 10 }],
        endpoints: [
          { model: A, gpu: GPU, instances: 1, minInstances: 1, maxInstances: 3 },
          { model: B, gpu: GPU, instances: 2, minInstances: 1, maxInstances: 4 },
        ],
      },
    ],
    router: { port: 0, adminKeys: [ADMIN_KEY], telemetryStaleMs: 10_000 },
    controller: { strategy: "lt-i", reconcileIntervalMs: 200, retryInitialMs: 300, retryMaxMs: 2000, agentLostAfterMs: 3000 },
    engines: { timeScale: 1, startTimeoutMs: 20_000, stopGraceMs: 3000 },
    // B is large enough that its transfer takes a while on a loaded box, so a kill lands mid-transfer.
    parameters: { blockCount: 16, stallMs: 1000, models: { [A]: { bytes: 16 * MiB, seed: 11 }, [B]: { bytes: 384 * MiB, seed: 12 } } },
  };
}

// Long prompts make prefill (compute-bound, queued per instance) the bottleneck, so capacity grows with instances.
// Each request's prompt starts with its own number: engine-sim caches prefixes (vLLM's APC), and one prompt repeated
// would be prefilled once per instance, leaving decode and this host's CPU as the bottleneck (the ratio then fell
// to 1.17 under CI's parallel files).
const LONG_PROMPT = "the tide comes in and the gate holds ".repeat(400);
let promptSeq = 0;

/** Output tokens per second of `streams` concurrent streams for `ms` through the global router. */
async function throughput(streams: number, ms: number): Promise<{ tokensPerS: number; failed: number }> {
  const until = Date.now() + ms;
  let tokens = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: streams }, async () => {
      while (Date.now() < until) {
        try {
          const s = await client.chat.completions.create({ model: A, messages: [{ role: "user", content: `request ${++promptSeq}: ${LONG_PROMPT}` }], stream: true, max_tokens: 16 });
          for await (const chunk of s) if (chunk.choices[0]?.delta.content) tokens++;
        } catch {
          failed++;
        }
      }
    }),
  );
  return { tokensPerS: tokens / (ms / 1000), failed };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-scaling-"));
  c = new Cluster({
    dir,
    region: "r1",
    config: config(),
    withGlobal: true,
    agents: ["n1", "n2", "n3", "n4", "n5"].map((nodeId) => ({ nodeId, host: "127.0.0.1", slots: 2 })),
  });
  await c.start();
  client = new OpenAI({ baseURL: `${c.routerUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30_000 });
  // Before any plan the configured instances are deployed: A ×1, B ×2.
  await c.serving(A, 1, 60_000);
  await c.serving(B, 2, 60_000);
}, 180_000);

afterAll(async () => {
  await c?.stop();
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("a running region scales (global + region + agents on loopback)", () => {
  it("targets 1 → 3: new engines on other nodes, blocks from the serving node over the data plane, routed to, throughput rises; 3 → 1 drains without failing a stream, slots to spot", async () => {
    const before = await c.listing();
    const first = before.instances.find((i) => i.model === A && i.state === "serving")!;
    await waitFor("A routable", async () => ((await throughput(1, 300)).tokensPerS > 0 ? true : undefined), 20_000);
    const slow = await throughput(24, 4000);

    await c.target(A, GPU, 3);
    const after = await c.serving(A, 3, 60_000);
    const servingA = after.instances.filter((i) => i.model === A && i.state === "serving");
    const newOnes = servingA.filter((i) => i.id !== first.id);
    expect(newOnes).toHaveLength(2);
    expect(new Set(servingA.map((i) => i.node)).size).toBe(3); // other nodes
    // Their blocks came over the data plane from the pool (the serving node, or the pool's copy), checksums
    // verified on arrival; the bytes equal the model's origin end to end.
    const transfers = c.logLines<{ model: string; completed: string[] }>("transfer finished").filter((t) => t.model === A);
    const moved = transfers.flatMap((t) => t.completed);
    for (const n of newOnes) {
      expect(moved).toContain(n.node);
      expect(await c.agents.get(n.node)!.client.verify(A, 11)).toEqual({ firstMismatch: -1, present: 16 });
    }
    // The gateway routes to them, and throughput rises.
    const fast = await throughput(24, 4000);
    for (const n of newOnes) {
      const m = await (await fetch(`${n.url}/metrics`)).text();
      expect(Number(/vllm:generation_tokens_total\{[^}]*\} (\d+)/.exec(m)?.[1] ?? 0)).toBeGreaterThan(0);
    }
    console.log(`throughput: 1 instance ${slow.tokensPerS.toFixed(0)} tok/s, 3 instances ${fast.tokensPerS.toFixed(0)} tok/s`);
    expect(fast.failed + slow.failed).toBe(0);
    expect(fast.tokensPerS).toBeGreaterThan(1.3 * slow.tokensPerS);

    // 3 → 1 while streams are in flight: draining instances finish them; no stream fails.
    const load = throughput(12, 3000);
    await new Promise((r) => setTimeout(r, 500));
    await c.target(A, GPU, 1);
    const drained = await load;
    expect(drained.failed).toBe(0);
    const end = await c.serving(A, 1, 30_000);
    const spot = end.instances.filter((i) => i.model === A && i.state === "spot");
    expect(spot).toHaveLength(2);
    for (const s of spot) expect(end.nodes.find((n) => n.nodeId === s.node)!.freeSlots).toBe(0); // slots held as spot
    // Their engine processes are gone.
    for (const s of spot) expect(processesWith("engine-sim", c.agents.get(s.node)!.grpc).size).toBe(0);
    const kept = end.instances.find((i) => i.model === A && i.state === "serving")!;
    expect(processesWith("engine-sim", "--parameters-from", c.agents.get(kept.node)!.grpc).size).toBeGreaterThan(0);
  }, 240_000);

  it("kill -9 of a source agent mid-transfer: the transfer is re-planned from the remaining sources and completes", async () => {
    // B 2 → 4 with no free node left: the controller redeploys A's two spot instances with B. A node that already
    // holds B's blocks (the pool's copy) starts at once; the other needs B's blocks moved from a pool source.
    const startedBefore = c.logLines("transfer started").length;
    await c.target(B, GPU, 4);
    const started = await waitFor("B's transfer started", () => c.logLines<{ model: string; sources: string[] }>("transfer started").slice(startedBefore).find((t) => t.model === B), 30_000, () => c.region.output().slice(-6000));
    const victim = started.sources[0]!;
    c.agents.get(victim)!.proc.kill("SIGKILL");
    const finished = await waitFor("B's transfer finished", () => c.logLines<{ model: string; completed: string[]; attempts: number }>("transfer finished").filter((t) => t.model === B).find((t) => t.completed.length > 0 && t.attempts >= 2), 60_000, () => c.region.output().slice(-6000));
    expect(finished.attempts).toBeGreaterThanOrEqual(2);
    await waitFor("the source lost", () => (c.logLines<{ node: string }>("node lost").some((l) => l.node === victim) ? true : undefined), 10_000);
    // The lost node's instances are gone; the agent comes back (a fresh node) and B reaches its target.
    await c.startAgent({ nodeId: victim, host: "127.0.0.1", slots: 2 });
    const l = await c.serving(B, 4, 120_000);
    for (const i of l.instances.filter((x) => x.model === B && x.state === "serving")) expect(await c.agents.get(i.node)!.client.verify(B, 12)).toMatchObject({ firstMismatch: -1 });
  }, 240_000);

  it("kill -9 of the region mid-scale-out, restart: it adopts what runs and ends with exactly the target, no duplicate or orphaned engine", async () => {
    // Room for A: a new node joins.
    await c.startAgent({ nodeId: "n6", host: "127.0.0.1", slots: 2 });
    await waitFor("n6 joined", async () => ((await c.listing()).nodes.find((n) => n.nodeId === "n6" && !n.lost) ? true : undefined), 20_000);
    const stepsBefore = c.logLines("scaling step").length;
    await c.target(A, GPU, 2);
    await waitFor("A's scale-out under way", () => (c.logLines<{ model: string }>("scaling step").slice(stepsBefore).some((t) => t.model === A) ? true : undefined), 30_000);
    c.region.child.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 300));
    await c.startRegion();
    // The planner re-sends the hour's plan to a region that comes back (a new process holds none).
    await c.resend();
    await c.serving(A, 2, 90_000);
    const l = await c.serving(B, 4, 60_000);
    expect(l.instances.filter((i) => i.model === A && i.state === "serving")).toHaveLength(2);
    const live = l.instances.filter((i) => i.state !== "spot");
    expect(live.filter((i) => i.model === A)).toHaveLength(2);
    expect(live.filter((i) => i.model === B)).toHaveLength(4);
    // Exactly one engine process per live instance on the agents, none without an instance.
    await new Promise((r) => setTimeout(r, 1500));
    const listed = new Set((await c.listing()).instances.filter((i) => i.state === "serving").map((i) => i.id));
    let engines = 0;
    for (const a of c.agents.values()) {
      if (a.proc.exitCode !== null || a.proc.signalCode !== null) continue;
      // engine-sim processes of this agent (each runs under a keeper, whose command line names it too)
      const procs = [...processesWith("engine-sim", "--parameters-from", a.grpc).values()].filter((cmd) => !cmd.includes("keeper"));
      engines += procs.length;
    }
    expect(engines).toBe(listed.size);
    expect(c.logLines("adopting engine").length).toBeGreaterThanOrEqual(5);
  }, 240_000);
});
