/**
 * Issue 48: prefill/decode disaggregation with `tidegate dev`'s in-process simulated engines, driven as a user would:
 * deploy/examples/dev-pd-sim.json gives a static region's two instances the roles prefill and decode by instance id
 * (engines.roles), and the official `openai` client streams through the router. The region gateway prefills on one
 * and decodes on the other; the prompt's KV moves over the region's in-process fabric (engines/sim/kv-fabric.ts),
 * whose pulls the region's /metrics count.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import { repoRoot } from "../../core/paths.js";
import { startDev, stopAll, type DevProc } from "./procs.js";

const MODEL = "llama3.2-3b";
let dir: string;
let dev: DevProc;

/** The sum of `name`'s series on `url`/metrics whose labels contain `labels` (0 when none). */
async function metric(url: string, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(`${name}{`) && l.includes(labels)).reduce((a, l) => a + Number(l.split(" ").at(-1)), 0);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-dev-pd-sim-"));
  const example = JSON.parse(readFileSync(join(repoRoot(), "deploy", "examples", "dev-pd-sim.json"), "utf8")) as Record<string, unknown>;
  dev = await startDev({ ...example, router: { port: 0 }, queue: { dataDir: join(dir, "data") } }, dir);
}, 120_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("tidegate dev with in-process prefill and decode instances", () => {
  it("streams every request through both, the prompt's KV pulled once per request", async () => {
    const client = new OpenAI({ baseURL: `${dev.url}/v1`, apiKey: "any" });
    let promptTotal = 0;
    for (let i = 0; i < 3; i++) {
      const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `request ${i}: ` + "tidegate ".repeat(150) }], max_tokens: 6, stream: true, stream_options: { include_usage: true } });
      let text = "";
      let prompt = 0;
      let completion = 0;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? "";
        if (chunk.usage) [prompt, completion] = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens];
      }
      expect(completion).toBe(6);
      expect(text.length).toBeGreaterThan(0);
      promptTotal += prompt;
    }
    expect(await metric(dev.url, "tidegate_region_kv_transfer_bytes_total", 'region="us-east"')).toBe(promptTotal * kvBytesPerToken(MODEL_SPECS[MODEL]!));
    expect(await metric(dev.url, "tidegate_region_kv_transfer_seconds_count", 'region="us-east"')).toBe(3);
    expect(await metric(dev.url, "tidegate_region_kv_transfer_failed_total", 'region="us-east"')).toBe(0);
    const listing = (await (await fetch(`${dev.url}/admin/regions/us-east/instances`, { headers: { authorization: `Bearer ${dev.key}` } })).json()) as { instances: { id: string; role: string }[] };
    expect(Object.fromEntries(listing.instances.map((i) => [i.id, i.role]))).toEqual({ [`us-east/${MODEL}/h100-80gb/0`]: "prefill", [`us-east/${MODEL}/h100-80gb/1`]: "decode" });
    expect(await metric(dev.url, "tidegate_region_serving_instances_by_role", 'role="prefill"')).toBe(1);
    expect(await metric(dev.url, "tidegate_region_serving_instances_by_role", 'role="decode"')).toBe(1);
  }, 60_000);
});
