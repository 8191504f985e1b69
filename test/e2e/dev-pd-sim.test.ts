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
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import { repoRoot } from "../../core/paths.js";
import { metricSum, startDev, stopAll, streamPrompts, type DevProc } from "./procs.js";

const MODEL = "llama3.2-3b";
let dir: string;
let dev: DevProc;

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
    const promptTotal = await streamPrompts(dev.url, MODEL, 3, 6);
    expect(await metricSum(dev.url, "tidegate_region_kv_transfer_bytes_total", 'region="us-east"')).toBe(promptTotal * kvBytesPerToken(MODEL_SPECS[MODEL]!));
    expect(await metricSum(dev.url, "tidegate_region_kv_transfer_seconds_count", 'region="us-east"')).toBe(3);
    expect(await metricSum(dev.url, "tidegate_region_kv_transfer_failed_total", 'region="us-east"')).toBe(0);
    const listing = (await (await fetch(`${dev.url}/admin/regions/us-east/instances`, { headers: { authorization: `Bearer ${dev.key}` } })).json()) as { instances: { id: string; role: string }[] };
    expect(Object.fromEntries(listing.instances.map((i) => [i.id, i.role]))).toEqual({ [`us-east/${MODEL}/h100-80gb/0`]: "prefill", [`us-east/${MODEL}/h100-80gb/1`]: "decode" });
    expect(await metricSum(dev.url, "tidegate_region_serving_instances_by_role", 'role="prefill"')).toBe(1);
    expect(await metricSum(dev.url, "tidegate_region_serving_instances_by_role", 'role="decode"')).toBe(1);
  }, 60_000);
});
