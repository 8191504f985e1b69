// Stage replicas as processes (issue 35 item 2) in a running region: `tidegate dev` with the example config
// deploy/examples/dev-keystage-stages.json — llama2-70b as a 4-stage pipeline (stage 0 holds 32 layers, the others 16)
// under the keystage strategy with keystage.stageProcesses. The instance is a head over stage processes: the
// region's node agents spawn one `tidegate engine-sim --stage` process per stage replica, activations pass between
// them, and a burst makes the key stage grow by starting more of them from the stage cache (the agents' host
// memory). Tokens reach the official OpenAI client through the global router. Read back as an operator would: the
// admin listing (stage, node and pid of every stage process), /proc, and dev's log.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_ROOT, regionListing, startDev, stopAll, type DevProc } from "./procs.js";
import { burstWatching, cmdline, expectStage0FromCache, parseStages } from "./stage-listing.js";

const MODEL = "llama2-70b";
const REGION = "us-east";
let dir: string;
let dev: DevProc;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-stages-"));
  const example = JSON.parse(readFileSync(join(REPO_ROOT, "deploy/examples/dev-keystage-stages.json"), "utf8")) as Record<string, unknown>;
  // Up to a dozen node processes (dev, its stage processes) share this machine's cores with other tests: a region whose
  // reports lag (telemetry older than 1.5 s) or a first token later than 10 s under that load is not what this test is
  // about, so the router waits longer before it gives the region up (router.telemetryStaleMs, router.streamStallMs).
  dev = await startDev({ ...example, router: { port: 0, telemetryStaleMs: 10_000, streamStallMs: 60_000 }, queue: { dataDir: join(dir, "data") } }, dir);
  client = new OpenAI({ baseURL: `${dev.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});


describe("tidegate dev serving a pipelined model with stage processes on its agents", () => {
  it("starts one process per stage, grows the key stage by starting stage processes under a burst, streams tokens through the router", async () => {
    // Every stage's first replica serves as its own engine-sim --stage process.
    let first = parseStages(await regionListing(dev, REGION));
    for (let i = 0; i < 200 && first.procs.filter((p) => p.state === "serving").length < 4; i++) {
      await new Promise((r) => setTimeout(r, 100));
      first = parseStages(await regionListing(dev, REGION));
    }
    expect(first.stages, first.detail).toEqual([1, 1, 1, 1]);
    expect(first.procs.map((p) => p.stage).sort(), first.detail).toEqual([0, 1, 2, 3]);
    for (const p of first.procs) {
      expect(p.pid).not.toBe(process.pid);
      expect(cmdline(p.pid), `pid ${p.pid}`).toMatch(/engine-sim .*--stage \{.*"stage":\d/);
    }

    const { texts, most, pids } = await burstWatching(client, MODEL, () => regionListing(dev, REGION), (_, st) => expect(st.procs.filter((p) => p.state !== "draining").length).toBeLessThanOrEqual(8));
    for (const p of first.procs) pids.add(p.pid);
    expect(texts).toHaveLength(96);
    for (const t of texts) expect(t.trim().split(/\s+/)).toHaveLength(32);

    const end = parseStages(await regionListing(dev, REGION));
    console.log(`stage processes: most per stage ${JSON.stringify(most)}, ${pids.size} processes seen; now: ${end.detail}`);
    // The key stage (stage 0: twice the layers of any other) grew by more processes.
    expect(most[0], end.detail).toBeGreaterThan(1);
    expect(Number(/(\d+) replicas added/.exec(end.detail)?.[1])).toBeGreaterThan(0);
    expect(pids.size).toBeGreaterThan(4);
    // dev's log: each stage process was started by a node agent, every scaled one from the stage cache (a host-memory
    // hit: fork + its stage's bytes over PCIe, cache.ts startMs).
    const started = dev
      .log()
      .split("\n")
      .filter((l) => l.includes('"stage process started"'))
      .map((l) => JSON.parse(l) as { engine: string; node: string; loadMs: number; pid: number });
    expectStage0FromCache(started);
    expect(new Set(started.map((s) => s.node)).size, "nodes hosting stage processes").toBeGreaterThanOrEqual(1);

    await dev.proc.stop(10_000);
    // The stage processes die with dev (its agents stop them; their keepers would if dev were killed).
    for (let i = 0; i < 50 && [...pids].some((pid) => cmdline(pid) !== ""); i++) await new Promise((r) => setTimeout(r, 100));
    for (const pid of pids) expect(cmdline(pid), `pid ${pid} after dev stopped`).toBe("");
  }, 180_000);
});
