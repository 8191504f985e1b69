// Stage replicas as processes in `tidegate region` over real agent processes (issue 35 item 2): the example config
// deploy/examples/dev-keystage-stages.json — llama2-70b as a 4-stage pipeline (stage 0 holds 32 layers, the others
// 16) under the keystage strategy with keystage.stageProcesses — served by one `tidegate region` in agents mode and
// two `tidegate agent` processes of 8 GPU slots, with `tidegate global` in front. The instance's head runs in the
// region's process; every stage replica is a `tidegate engine-sim --stage` process that an agent starts on a
// StartEngine with `stage` over gRPC, on a node whose agent holds the model's blocks (the stage cache). A burst makes
// the key stage grow by starting more stage processes from the cache; tokens reach the OpenAI client through the
// global router. Read back as an operator would: the admin listing through the router, /proc, the region's log.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RegionInstances } from "../../core/ports.js";
import { REPO_ROOT, stopAll } from "../e2e/procs.js";
import { ADMIN_KEY, Cluster, waitFor } from "./cluster.js";
import { burstWatching, cmdline, expectStage0FromCache, parseStages } from "../e2e/stage-listing.js";

const MODEL = "llama2-70b";
const REGION = "us-east";
let dir: string;
let c: Cluster;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-region-stages-"));
  const example = JSON.parse(readFileSync(join(REPO_ROOT, "deploy/examples/dev-keystage-stages.json"), "utf8")) as Record<string, unknown>;
  c = new Cluster({
    dir,
    region: REGION,
    // A loaded 2-core box: the router waits longer before it gives the region up (as in the dev test).
    config: { ...example, router: { port: 0, adminKeys: [ADMIN_KEY], telemetryStaleMs: 10_000, streamStallMs: 60_000 }, controller: { ...(example.controller as object), agentLostAfterMs: 3000 }, engines: { ...(example.engines as object), startTimeoutMs: 30_000 } },
    withGlobal: true,
    agents: ["n1", "n2"].map((nodeId) => ({ nodeId, host: "127.0.0.1", slots: 8 })),
  });
  await c.start();
  client = new OpenAI({ baseURL: `${c.routerUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
}, 120_000);

afterAll(async () => {
  await c?.stop();
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});


/** The parent pid of a live process (Linux /proc). */
const ppid = (pid: number): number => Number(/^\d+ \(.*\) \S (\d+)/.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1]);

describe("tidegate region over agent processes serving a pipelined model with stage processes", () => {
  it("the head in the region, stage processes on the agents; a burst grows the key stage from the cache; tokens through the global router", async () => {
    // Every stage's first replica serves as its own engine-sim --stage process, a child of an agent process.
    const first = await waitFor(
      "4 serving stage processes",
      async () => {
        const p = parseStages(await c.listing().catch(() => ({ instances: [] }) as unknown as RegionInstances), MODEL);
        return p.procs.filter((x) => x.state === "serving").length >= 4 ? p : undefined;
      },
      90_000,
      () => c.region.output().slice(-6000),
    );
    expect(first.stages, first.detail).toEqual([1, 1, 1, 1]);
    expect(first.procs.map((p) => p.stage).sort(), first.detail).toEqual([0, 1, 2, 3]);
    const agentPids = new Set([...c.agents.values()].map((a) => a.proc.pid));
    for (const p of first.procs) {
      expect(cmdline(p.pid), `pid ${p.pid}`).toMatch(/engine-sim .*--stage \{.*"stage":\d/);
      // Its parent is the agent, or the agent's keeper of it (engine-supervisor.ts).
      const parent = ppid(p.pid);
      expect(agentPids.has(parent) || agentPids.has(ppid(parent)), `stage process ${p.pid}: parent ${parent}, its parent ${ppid(parent)}; agents ${[...agentPids].join(",")}`).toBe(true);
    }

    // Slots as the region books them: the head holds none, each stage process one on its own node.
    // (The listing's nodes follow the agents' announcements, every 300 ms: wait for them to agree.)
    const held = (l: RegionInstances) => l.nodes.reduce((s, n) => s + (n.gpuSlots - n.freeSlots), 0);
    const booked = await waitFor("the nodes' held slots to equal the stage processes", async () => {
      const l = await c.listing();
      return held(l) === parseStages(l, MODEL).procs.length ? l : undefined;
    }, 15_000, () => JSON.stringify(c.region.output().slice(-3000)));
    expect(booked.nodes.map((n) => n.gpuSlots)).toEqual([8, 8]);

    let maxHeld = 0;
    const { texts, most, pids } = await burstWatching(client, MODEL, () => c.listing().catch(() => undefined), (l) => (maxHeld = Math.max(maxHeld, held(l))));
    for (const p of first.procs) pids.add(p.pid);
    expect(texts).toHaveLength(96);
    for (const t of texts) expect(t.trim().split(/\s+/)).toHaveLength(32);

    const end = parseStages(await c.listing(), MODEL);
    console.log(`region stage processes: most per stage ${JSON.stringify(most)}, ${pids.size} processes seen, at most ${maxHeld} slots held; now: ${end.detail}`);
    expect(most[0], end.detail).toBeGreaterThan(1);
    expect(pids.size).toBeGreaterThan(4);
    // About the instance's 8 GPUs at most: its stage processes (the scaler keeps them within 8, draining ones included);
    // the listing reads the agents' announcements, which lag a stop by up to 300 ms, hence the slack.
    expect(maxHeld).toBeLessThanOrEqual(8 + 4);
    // The region's log: every scaled stage-0 process was started from the stage cache (fork + stage bytes over PCIe).
    const started = c.logLines<{ engine: string; node: string; loadMs: number; pid: number }>("stage process started");
    expectStage0FromCache(started);

    // Stopping the region stops its heads, and they their stage processes on the agents.
    await c.region.stop(15_000);
    for (let i = 0; i < 100 && [...pids].some((pid) => cmdline(pid).includes("--stage")); i++) await new Promise((r) => setTimeout(r, 100));
    for (const pid of pids) expect(cmdline(pid), `pid ${pid} after the region stopped`).not.toContain("--stage");
  }, 240_000);
});
