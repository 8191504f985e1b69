// A burst against `tidegate dev`: a 10× step in llama3.2-3b traffic makes the region controller scale out (the
// reactive strategy: effective memory utilization above 0.70), the new instance's blocks move over the in-process
// data plane, and it serves requests within seconds of the decision. Driven as a user would: the OpenAI client
// against the dev process, the admin listing read with the key dev prints.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RegionInstances } from "../../core/ports.js";
import { regionListing, startDev, stopAll, type DevProc } from "./procs.js";

const MODEL = "llama3.2-3b";
const PROMPT = "the tide comes in and the gate holds ".repeat(250); // ≈ 2,000 tokens
let dir: string;
let dev: DevProc;
let url: string;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-burst-"));
  const config = {
    models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
    regions: [{ name: "dev1", gpus: [{ type: "h100-80gb", count: 16 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 4 }] }],
    router: { port: 0 },
    queue: { dataDir: join(dir, "data") },
    controller: { strategy: "reactive", reconcileIntervalMs: 250 },
    // A small KV capacity so that a 10× step fills a 3B model's memory, as a larger model's would.
    engines: { timeScale: 1, kvCapacityTokens: 24_000 },
    parameters: { models: { [MODEL]: { bytes: 16 * 1024 * 1024 } } },
  };
  dev = await startDev(config, dir);
  url = dev.url;
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const listing = (): Promise<RegionInstances> => regionListing(dev, "dev1");

/** `streams` concurrent streaming clients for `ms`; resolves with the requests that failed. */
async function load(streams: number, ms: number): Promise<number> {
  const until = Date.now() + ms;
  let failed = 0;
  await Promise.all(
    Array.from({ length: streams }, async () => {
      while (Date.now() < until) {
        try {
          const s = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: PROMPT }], stream: true, max_tokens: 200 });
          for await (const _ of s);
        } catch {
          failed++;
        }
      }
    }),
  );
  return failed;
}

describe("tidegate dev under a 10× burst", () => {
  it("scales out and the new instance serves within seconds of the controller's decision", async () => {
    expect((await listing()).instances.filter((i) => i.state === "serving")).toHaveLength(1);
    expect(await load(2, 3000)).toBe(0);
    expect((await listing()).actions.filter((a) => a.reason !== "initial-deployment")).toHaveLength(0); // the base load does not scale

    // 10× step: 20 streams. Watch the listing for the scale-out and for the new instance taking requests.
    const burst = load(20, 25_000);
    const firstSeenServing = new Map<string, number>();
    let decision: { atMs: number; instanceId: string } | undefined;
    let servedAt: number | undefined;
    const deadline = Date.now() + 25_000;
    while (Date.now() < deadline && servedAt === undefined) {
      const l = await listing();
      decision ??= l.actions.find((a) => a.kind === "provision" && a.reason !== "initial-deployment");
      if (decision !== undefined) {
        const inst = l.instances.find((i) => i.id === decision!.instanceId);
        if (inst?.state === "serving") {
          if (!firstSeenServing.has(inst.id)) firstSeenServing.set(inst.id, Date.now());
          const inFlight = Number(/(\d+) in flight/.exec(inst.detail)?.[1] ?? 0);
          if (inFlight > 0) servedAt = Date.now();
        }
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await burst).toBe(0);
    expect(decision, dev.proc.output().slice(-3000)).toBeDefined();
    expect(servedAt, "the new instance never took a request").toBeDefined();
    const ms = servedAt! - decision!.atMs;
    console.log(`burst: scale-out decided (${decision!.instanceId}); the new instance served requests ${ms} ms later`);
    expect(ms).toBeLessThan(5000);
    // The dev log says what happened, step by step.
    const out = dev.proc.output();
    expect(out).toContain('"msg":"scaling step"');
    expect(out).toContain('"msg":"transfer finished"');
    expect(out).toContain('"msg":"instance serving"');
  }, 120_000);
});
