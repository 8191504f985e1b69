// Independent scaling of a disaggregated model's two pools, live (issue 48 item 4): `tidegate dev` on
// deploy/examples/dev-pd.json (one region, llama3.2-3b as a prefill pool and a decode pool, 1–3 instances each,
// in-process node agents, engines slowed 10×, the default strategy). Each pool scales on its own role's load
// (region/runtime/pool-signals.ts, Dynamo's per-role capacity at the SLO): a ramp of long prompts with short answers
// grows the prefill pool and not the decode pool; a ramp of short prompts with long answers grows the decode pool and
// not the prefill pool (its first decode instance may be a prefill one switched over, BlitzScale §5.2, which the
// prefill pool makes up for, to its size before the ramp and no further). Driven as a user would: the official `openai` client, the admin listing with dev's key.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RegionInstances } from "../../core/ports.js";
import { REPO_ROOT, regionListing, startDev, stopAll, type DevProc } from "./procs.js";

const EXAMPLE = JSON.parse(readFileSync(join(REPO_ROOT, "deploy", "examples", "dev-pd.json"), "utf8")) as { regions: { name: string }[]; models: { name: string }[] };
const MODEL = EXAMPLE.models[0]!.name;
const REGION = EXAMPLE.regions[0]!.name;
const LONG_PROMPT = "the tide comes in and the gate holds ".repeat(500); // ≈ 4,000 tokens
const SHORT_PROMPT = "tell me about the tide";
let dir: string;
let dev: DevProc;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-pd-pools-"));
  dev = await startDev({ ...EXAMPLE, router: { port: 0 }, queue: { dataDir: join(dir, "data") } }, dir);
  client = new OpenAI({ baseURL: `${dev.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120_000 });
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const listing = (): Promise<RegionInstances> => regionListing(dev, REGION);
type Action = RegionInstances["actions"][number];
const scaleOut = (a: Action) => a.kind !== "drain" && a.reason !== "initial-deployment";
/** A pool's instances that serve or will serve. */
const poolSize = (l: RegionInstances, role: string) => l.instances.filter((i) => i.role === role && i.state !== "spot" && i.state !== "draining").length;

/**
 * `streams` clients each streaming one request after another while `until()` is false and the bound has not passed;
 * resolves with the requests that failed.
 */
async function ramp(streams: number, prompt: string, maxTokens: number, until: () => boolean, boundMs: number): Promise<number> {
  const deadline = Date.now() + boundMs;
  let failed = 0;
  await Promise.all(
    Array.from({ length: streams }, async () => {
      while (!until() && Date.now() < deadline) {
        try {
          const s = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: prompt }], stream: true, max_tokens: maxTokens });
          for await (const _ of s);
        } catch (e) {
          if (++failed <= 3) console.log(`request failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      }
    }),
  );
  return failed;
}

/** Polls the listing until a scale-out of `role` appears after `sinceMs` (region clock) or the bound passes. */
async function watchFor(role: "prefill" | "decode", sinceMs: number, boundMs: number, seen: { action?: Action }): Promise<void> {
  const deadline = Date.now() + boundMs;
  while (Date.now() < deadline && seen.action === undefined) {
    seen.action = (await listing()).actions.find((a) => a.atMs >= sinceMs && a.role === role && scaleOut(a));
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("tidegate dev with a prefill pool and a decode pool", () => {
  it("long prompts grow the prefill pool and not the decode pool; long outputs grow the decode pool and not the prefill pool", async () => {
    // dev serves once its router does; each pool's first instance comes up on its own in-process agent, the decode
    // one sometimes later on a loaded machine: wait for both (bounded), then read where they started.
    const servingRoles = (l: RegionInstances) => l.instances.filter((i) => i.state === "serving").map((i) => i.role).sort();
    let start = await listing();
    for (const deadline = Date.now() + 30_000; servingRoles(start).length < 2 && Date.now() < deadline; start = await listing()) await new Promise((r) => setTimeout(r, 200));
    expect(servingRoles(start)).toEqual(["decode", "prefill"]);
    const pools = start.actions.map((a) => a.role).sort();
    expect(pools).toEqual(["decode", "prefill"]);
    const t0 = Math.max(...start.actions.map((a) => a.atMs));

    // Long prompts, two-token answers: prompt tokens/s over one prefill engine's capacity at the TTFT target.
    const a: { action?: Action } = {};
    const prompts = ramp(4, LONG_PROMPT, 2, () => a.action !== undefined, 40_000);
    await watchFor("prefill", t0, 40_000, a);
    expect(await prompts).toBe(0);
    expect(a.action, dev.log().slice(-3000)).toBeDefined();
    const afterPrompts = await listing();
    const decodeOutDuringPrompts = afterPrompts.actions.filter((x) => x.role === "decode" && scaleOut(x));
    expect(decodeOutDuringPrompts).toEqual([]);
    console.log(`long prompts: prefill pool scaled out (${a.action!.kind}, ${a.action!.reason}, ${a.action!.from} → ${a.action!.desired}); decode pool: no scale-out`);
    const newPrefill = afterPrompts.instances.find((i) => i.id === a.action!.instanceId);
    expect(newPrefill?.role).toBe("prefill");

    // Let the demand window (10 s) forget the prompts, then short prompts with long answers.
    await new Promise((r) => setTimeout(r, 11_000));
    const beforeOutputs = await listing();
    const t1 = Math.max(...beforeOutputs.actions.map((x) => x.atMs));
    const d: { action?: Action } = {};
    const outputs = ramp(30, SHORT_PROMPT, 300, () => d.action !== undefined, 45_000);
    await watchFor("decode", t1, 45_000, d);
    const failed = await outputs;
    expect(d.action, dev.log().slice(-3000)).toBeDefined();
    expect(failed).toBe(0);
    const afterOutputs = await listing();
    // The decode pool grew; the prefill pool did not: a prefill scale-out here only makes up for an instance the
    // decode pool switched away from it (BlitzScale §5.2), never past the prefill pool's size before the ramp.
    expect(poolSize(afterOutputs, "decode")).toBeGreaterThan(poolSize(beforeOutputs, "decode"));
    expect(poolSize(afterOutputs, "prefill")).toBeLessThanOrEqual(poolSize(beforeOutputs, "prefill"));
    const steps = afterOutputs.actions.filter((x) => x.atMs > t1);
    const switches = steps.filter((x) => x.kind === "switch").length;
    expect(steps.filter((x) => x.role === "prefill" && scaleOut(x)).length).toBeLessThanOrEqual(switches);
    console.log(`long outputs: decode pool scaled out (${d.action!.kind}, ${d.action!.reason}, ${d.action!.from} → ${d.action!.desired}); steps: ${steps.map((x) => `${x.role} ${x.kind}`).join(", ")}; pools before ${poolSize(beforeOutputs, "prefill")}P/${poolSize(beforeOutputs, "decode")}D, after ${poolSize(afterOutputs, "prefill")}P/${poolSize(afterOutputs, "decode")}D`);
    expect(afterOutputs.instances.find((i) => i.id === d.action!.instanceId)?.role).toBe("decode");
    // Every request went through both steps: the region's KV pulls are counted.
    const metrics = await (await fetch(`${dev.url}/metrics`)).text();
    expect(Number(/tidegate_region_kv_transfer_seconds_count\{region="us-east"\} (\d+)/.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(10);
  }, 180_000);
});
