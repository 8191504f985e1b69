/**
 * Issue 48: a prefill/decode deployment behind tidegate, driven as a user would. Two `tidegate engine-sim` processes,
 * one `--role prefill`, one `--role decode` (vLLM's kv_transfer_params contract), behind `tidegate dev` with
 * engines.kind "openai-http" and engines.roles; the official `openai` client streams through the router. The region
 * gateway prefills on the prefill instance and decodes on the decode instance, and the prompt's KV crosses the native
 * data plane between the two engine processes (their /metrics count the bytes, each once).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kvBytesPerToken, MODEL_SPECS } from "../../core/models.js";
import { repoRoot } from "../../core/paths.js";
import { metricSum, spawnTidegate, startDev, stopAll, streamPrompts, type DevProc, type Proc } from "./procs.js";

const MODEL = "llama3.2-3b";
let dir: string;
let dev: DevProc;
let prefill: Proc;
let decode: Proc;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-dev-pd-"));
  const args = (role: string) => ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--tp", "2", "--port", "0", "--time-scale", "0.1", "--role", role];
  const started = await Promise.all(["prefill", "decode"].map((role) => spawnTidegate(`engine-sim ${role}`, args(role), /(http:\/\/127\.0\.0\.1:\d+)/)));
  prefill = started[0]!;
  decode = started[1]!;
  const [p, d] = [prefill.match[1]!, decode.match[1]!];
  // The README's recipe (deploy/examples/dev-pd-urls.json), its engines' fixed ports swapped for the ones these got.
  const example = JSON.parse(readFileSync(join(repoRoot(), "deploy", "examples", "dev-pd-urls.json"), "utf8")) as { engines: { urls: Record<string, string[]>; roles: Record<string, string> } };
  const [exampleP, exampleD] = example.engines.urls[`us-east/${MODEL}`]!;
  expect([example.engines.roles[exampleP!], example.engines.roles[exampleD!]]).toEqual(["prefill", "decode"]);
  dev = await startDev({ ...example, engines: { ...example.engines, urls: { [`us-east/${MODEL}`]: [p, d] }, roles: { [p]: "prefill", [d]: "decode" } }, router: { port: 0 }, queue: { dataDir: join(dir, "data") } }, dir);
}, 120_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("tidegate dev over a prefill instance and a decode instance", () => {
  it("streams every request through both, the prompt's KV moved once per request between the engine processes", async () => {
    const promptTotal = await streamPrompts(dev.url, MODEL, 3, 6);
    const bytes = promptTotal * kvBytesPerToken(MODEL_SPECS[MODEL]!);
    expect(await metricSum(decode.match[1]!, "tidegate_kv_transfer_received_bytes_total")).toBe(bytes);
    expect(await metricSum(prefill.match[1]!, "tidegate_kv_transfer_sent_bytes_total")).toBe(bytes);
    // Each request finished twice: its one-token prefill on the prefill instance, its output on the decode instance.
    expect(await metricSum(prefill.match[1]!, "vllm:request_success_total", 'finished_reason="length"')).toBe(3);
    expect(await metricSum(decode.match[1]!, "vllm:request_success_total", 'finished_reason="length"')).toBe(3);
    expect(await metricSum(prefill.match[1]!, "vllm:generation_tokens_total")).toBe(3);
    // Each pull's time on the decode instance (issue 48 item 6: transfer latency).
    expect(await metricSum(decode.match[1]!, "tidegate_kv_transfer_seconds_count")).toBe(3);
    expect(await metricSum(decode.match[1]!, "tidegate_kv_transfer_seconds_sum")).toBeGreaterThan(0);
    // The admin listing names each instance's role (issue 48 item 6).
    const listing = (await (await fetch(`${dev.url}/admin/regions/us-east/instances`, { headers: { authorization: `Bearer ${dev.key}` } })).json()) as { instances: { url: string; role: string }[] };
    expect(Object.fromEntries(listing.instances.map((i) => [i.url, i.role]))).toEqual({ [prefill.match[1]!]: "prefill", [decode.match[1]!]: "decode" });
    // And the region's /metrics count serving instances per role.
    expect(await metricSum(dev.url, "tidegate_region_serving_instances_by_role", 'role="prefill"')).toBe(1);
    expect(await metricSum(dev.url, "tidegate_region_serving_instances_by_role", 'role="decode"')).toBe(1);
    expect(await metricSum(dev.url, "tidegate_region_serving_instances_by_role", 'role="both"')).toBe(0);
  }, 60_000);
});
