// A burst against `tidegate dev` on the README's scaling recipe (deploy/examples/dev-scaling.json, its numbers exactly: one
// region, the default strategy (core/defaults.ts, predictive-hpa) with its HPA's metric window 5 s and sync 1 s,
// engines.kvCapacityTokens 24,000): a 10× step in llama3.2-3b traffic makes the region controller scale out (the HPA:
// windowed effective memory utilization past its 0.70 target's tolerance; no history, so no forecast floor), the new
// instance's blocks move over the in-process data plane, and it serves requests within seconds of the decision. Driven as a user would: the OpenAI client against the dev process, the admin listing read with the
// key dev prints, the log read from the file the banner names.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RegionInstances } from "../../core/ports.js";
import { DEFAULT_STRATEGY } from "../../core/defaults.js";
import { REPO_ROOT, regionListing, startDev, stopAll, type DevProc } from "./procs.js";

/** The README's recipe: one region, llama3.2-3b, reactive, a small KV capacity (a 10× step fills a 3B model's memory). */
const RECIPE = JSON.parse(readFileSync(join(REPO_ROOT, "deploy", "examples", "dev-scaling.json"), "utf8")) as { regions: { name: string }[]; models: { name: string }[] };
const MODEL = RECIPE.models[0]!.name;
const REGION = RECIPE.regions[0]!.name;
const PROMPT = "the tide comes in and the gate holds ".repeat(250); // ≈ 2,000 tokens
let dir: string;
let dev: DevProc;
let url: string;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-burst-"));
  dev = await startDev({ ...RECIPE, router: { port: 0 }, queue: { dataDir: join(dir, "data") } }, dir);
  url = dev.url;
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const listing = (): Promise<RegionInstances> => regionListing(dev, REGION);

/** `streams` concurrent streaming clients for `ms`; resolves with the requests that failed (the first few are printed). */
async function load(streams: number, ms: number): Promise<number> {
  const start = Date.now();
  const until = start + ms;
  let failed = 0;
  await Promise.all(
    Array.from({ length: streams }, async () => {
      while (Date.now() < until) {
        try {
          const s = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: PROMPT }], stream: true, max_tokens: 200 });
          for await (const _ of s);
        } catch (e) {
          if (++failed <= 3) console.log(`request failed ${Date.now() - start} ms into the load: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    }),
  );
  return failed;
}

describe("tidegate dev under a 10× burst", () => {
  it("scales out and the new instance serves within seconds of the controller's decision", async () => {
    // The recipe names no strategy: dev runs the default, and its banner says so.
    expect(JSON.stringify(RECIPE)).not.toContain('"strategy"');
    expect(dev.proc.match[0]).toContain(`scaling: ${DEFAULT_STRATEGY} (controller.strategy)`);
    expect((await listing()).instances.filter((i) => i.state === "serving")).toHaveLength(1);
    expect(await load(2, 3000)).toBe(0);
    expect((await listing()).actions.filter((a) => a.reason !== "initial-deployment")).toHaveLength(0); // the base load does not scale

    // 10× step: 20 streams. Watch the listing for the scale-out and for the new instance taking requests.
    const burst = load(20, 25_000);
    const firstSeenServing = new Map<string, number>();
    let decision: { atMs: number; instanceId: string; reason: string } | undefined;
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
    expect(decision, dev.log().slice(-3000)).toBeDefined();
    expect(servedAt, "the new instance never took a request").toBeDefined();
    expect(decision!.reason).toBe("hpa-up");
    const ms = servedAt! - decision!.atMs;
    console.log(`burst: scale-out decided (${decision!.instanceId}); the new instance served requests ${ms} ms later`);
    expect(ms).toBeLessThan(5000);
    // The dev log (its file, as the banner says) tells what happened, step by step.
    const out = dev.log();
    expect(out).toContain('"msg":"scaling step"');
    expect(out).toContain('"msg":"transfer started"');
    expect(out).toContain('"msg":"transfer finished"');
    expect(out).toContain('"msg":"instance serving"');
  }, 120_000);
});
