// Key-stage scaling in a running region: `tidegate dev` with llama2-70b served as a 4-stage pipeline (config
// keystage.pipelines; stage 0 holds 32 layers, the others 16 each) under the keystage strategy. Each instance's 8 GPUs are the budget its stages share; a burst
// of streaming requests from the official OpenAI client queues at the pipeline and the instance's key-stage scaler
// grows the stages that need it. Read back as an operator would: the admin listing with the key dev prints.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RegionInstances } from "../../core/ports.js";
import { regionListing, runCli, startDev, stopAll, type DevProc } from "./procs.js";
import { streamBurst } from "./streams.js";

const MODEL = "llama2-70b";
let dir: string;
let dev: DevProc;
let url: string;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-keystage-"));
  const config = {
    models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 8 } }],
    regions: [{ name: "dev1", gpus: [{ type: "h100-80gb", count: 16 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 2 }] }],
    router: { port: 0 },
    queue: { dataDir: join(dir, "data") },
    controller: { strategy: "keystage", reconcileIntervalMs: 250 },
    // 20× faster than the measured profile: a 512-token prompt with 32 output tokens takes ≈ 0.2 s through 4 stages.
    engines: { timeScale: 0.05 },
    parameters: { models: { [MODEL]: { bytes: 16 * 1024 * 1024 } } },
    keystage: {
      pipelines: [{ model: MODEL, gpu: "h100-80gb", layersPerStage: [32, 16, 16, 16], profileTp: 4 }],
      params: { intervalMs: 1000, windowMs: 10_000 },
    },
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

/** Replicas per stage of the one serving instance, from its listing detail. */
function stages(l: RegionInstances): number[] | undefined {
  const inst = l.instances.find((i) => i.state === "serving");
  const m = /pipeline key-stage: replicas per stage \[([\d,]+)\]/.exec(inst?.detail ?? "");
  return m?.[1]!.split(",").map(Number);
}

describe("tidegate dev with a pipelined model under the keystage strategy", () => {
  it("serves streams through the pipeline and splits the instance's GPUs over its stages under a burst", async () => {
    expect(stages(await listing())).toEqual([1, 1, 1, 1]);
    const prompt = "the tide comes in and the gate holds ".repeat(60); // ≈ 500 tokens
    let peak = 4;
    const most = [1, 1, 1, 1]; // the most replicas each stage had at any reading
    let stop = false;
    const watch = (async () => {
      while (!stop) {
        const s = stages(await listing());
        if (s !== undefined) {
          const total = s.reduce((a, b) => a + b, 0);
          expect(total).toBeLessThanOrEqual(8);
          peak = Math.max(peak, total);
          s.forEach((n, i) => (most[i] = Math.max(most[i]!, n)));
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    // 16 concurrent streams, each sending 6 requests one after another: the pipeline (1 replica a stage) queues.
    const texts = await streamBurst(client, MODEL, prompt, 16, 6, 32);
    stop = true;
    await watch;
    expect(texts).toHaveLength(96);
    for (const t of texts) expect(t.trim().split(/\s+/)).toHaveLength(32);
    const l = await listing();
    const detail = l.instances.find((i) => i.state === "serving")!.detail;
    console.log(`keystage: peak replicas ${peak}, most per stage ${JSON.stringify(most)}; now: ${detail}`);
    expect(peak, detail).toBeGreaterThan(4);
    // Stage 0 holds twice the layers of each other stage: it is the key stage and gets the most replicas.
    expect(most[0], JSON.stringify(most)).toBeGreaterThan(Math.max(...most.slice(1)));
    expect(detail).toMatch(/of 8 GPUs held/);
    expect(detail).toMatch(/; 0 in flight/);
    expect(Number(/(\d+) replicas added/.exec(detail)?.[1])).toBeGreaterThan(0);
  }, 120_000);

  it("refuses bad pipeline config at start-up, naming the config path", async () => {
    const bloom = { model: "bloom-176b", gpu: "h100-80gb", layersPerStage: [9, 9, 9, 9, 9, 9, 8, 8], profileTp: 8 };
    const cases: [object, string][] = [
      [{ pipelines: [{ ...bloom, layersPerStage: [9, 9, 9, 9, 9, 9, 8, 7] }] }, "keystage.pipelines[0].layersPerStage: stages hold 69 layers in all; bloom-176b has 70"],
      [{ pipelines: [{ ...bloom, layersPerStage: [35, 35] }] }, "keystage.pipelines[0].layersPerStage[0]: a stage of 35 layers holds 163.9 GiB of weights; one h100-80gb holds 72.0 GiB"],
      [{ pipelines: [bloom], params: { kp: 50 } }, "keystage.params.kp: must be ≤ 20, got 50"],
    ];
    for (const [keystage, message] of cases) {
      const file = join(dir, "bad.json");
      writeFileSync(file, JSON.stringify({ keystage }));
      const r = await runCli(["dev", "--config", file, "--port", "0"]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(message);
      expect(r.stderr).not.toMatch(/at least 2 element/);
    }
  });
});
