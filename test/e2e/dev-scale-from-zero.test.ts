// A model at zero starts on its first request by default (issue 50): `tidegate dev` with llama3.1-8b at
// `instances: 0, minInstances: 0` in every region and no `controller.scaleToZero` settings (the idle drain off). A
// streamed request through the official OpenAI client is held at the region the router picks while the controller
// brings an instance up, then streams; the admin listing shows the cold start with its source and the model stays up
// (nothing drains it back to zero without the idle drain). llama2-70b is at zero too, but its instance needs 4 GPUs
// and each region has 2 left: every region refuses it at once, and the router answers 503 `no_capacity` with
// Retry-After and each region's reason — not a telemetry error, and not after a minute's hold.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ColdListing } from "../../region/gateway/slo-book.js";
import type { RegionInstances } from "../../core/ports.js";
import { regionListing, startDev, stopAll, type DevProc } from "./procs.js";

const WARM = "llama3.2-3b";
const COLD = "llama3.1-8b";
const BIG = "llama2-70b";
const GPU = "h100-80gb";
const REGIONS = ["us-east", "us-west"];
const MiB = 1 << 20;
let dir: string;
let dev: DevProc;
let client: OpenAI;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-dev-zero-"));
  // Each region: one node of 4 GPUs; llama3.2-3b's instance holds 2 of them.
  const region = (name: string, other: string) => ({
    name,
    proximity: [other],
    gpus: [{ type: GPU, count: 4 }],
    endpoints: [
      { model: WARM, gpu: GPU, instances: 1, minInstances: 1, maxInstances: 1 },
      { model: COLD, gpu: GPU, instances: 0, minInstances: 0, maxInstances: 1 },
      { model: BIG, gpu: GPU, instances: 0, minInstances: 0, maxInstances: 1 },
    ],
  });
  const config = {
    models: [
      { name: WARM, gpusPerInstance: { [GPU]: 2 } },
      { name: COLD, gpusPerInstance: { [GPU]: 2 } },
      { name: BIG, gpusPerInstance: { [GPU]: 4 } },
    ],
    regions: [region(REGIONS[0]!, REGIONS[1]!), region(REGIONS[1]!, REGIONS[0]!)],
    router: { port: 0 },
    queue: { dataDir: join(dir, "data") },
    parameters: { models: { [WARM]: { bytes: 8 * MiB }, [COLD]: { bytes: 8 * MiB }, [BIG]: { bytes: 8 * MiB } } },
  };
  dev = await startDev(config, dir);
  client = new OpenAI({ baseURL: `${dev.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
}, 90_000);

afterAll(async () => {
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const coldOf = (l: RegionInstances) => (l as RegionInstances & { cold?: ColdListing }).cold;
const live = (l: RegionInstances, model: string) => l.instances.filter((i) => i.model === model && i.state !== "spot" && i.state !== "draining");

/** One streamed chat completion for `model`: the region that served it (x-tidegate-region) and its content chunks. */
async function stream(model: string): Promise<{ region: string; chunks: string[] }> {
  const { data, response } = await client.chat.completions.create({ model, messages: [{ role: "user", content: "wake up" }], stream: true, max_tokens: 8 }).withResponse();
  const chunks: string[] = [];
  for await (const chunk of data) {
    const t = chunk.choices[0]?.delta.content ?? "";
    if (t !== "") chunks.push(t);
  }
  return { region: response.headers.get("x-tidegate-region") ?? "", chunks };
}

describe("tidegate dev: a model at zero with no scaleToZero settings", () => {
  it("streams its first request through the openai client after a cold start, listed with its source, and stays up", async () => {
    for (const r of REGIONS) expect(live(await regionListing(dev, r), COLD)).toHaveLength(0);

    const first = await stream(COLD);
    expect(first.chunks).toHaveLength(8);
    expect(REGIONS).toContain(first.region);
    const l = await regionListing(dev, first.region);
    const starts = coldOf(l)?.starts.filter((s) => s.model === COLD) ?? [];
    // The node holds the pool's host copy of the model and has free slots: loaded without a transfer.
    expect(starts.map((s) => s.source)).toEqual(["host"]);
    expect(l.instances.find((i) => i.id === starts[0]!.instanceId)?.state).toBe("serving");
    expect(l.actions.find((a) => a.model === COLD)).toMatchObject({ kind: "provision", reason: "cold-start", from: 0, desired: 1 });
    expect(dev.log()).toMatch(new RegExp(`"msg":"cold start"[^\\n]*"model":"${COLD.replace(/\./g, "\\.")}"[^\\n]*"source":"host"`));

    // Without the idle drain nothing takes it back to zero: a second request finds it warm, no new cold start.
    const second = await stream(COLD);
    expect(second.chunks).toHaveLength(8);
    const after = await regionListing(dev, first.region);
    expect(coldOf(after)?.starts.filter((s) => s.model === COLD)).toHaveLength(1);
    expect(live(after, COLD).map((i) => i.state)).toEqual(["serving"]);
    expect(after.actions.filter((a) => a.model === COLD && a.kind === "drain")).toEqual([]);
  }, 60_000);

  it("a model at zero that no region can place gets 503 no_capacity with Retry-After and each region's reason, at once", async () => {
    const sent = Date.now();
    const res = await fetch(`${dev.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: BIG, messages: [{ role: "user", content: "never" }], stream: true, max_tokens: 4 }),
    });
    const waitedMs = Date.now() - sent;
    const body = (await res.json()) as { error: { code: string; type: string; message: string } };
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("5"); // controller.scaleToZero.retryAfterS's default
    expect(body.error.code).toBe("no_capacity");
    expect(body.error.type).toBe("server_error");
    expect(body.error.message).toMatch(/^model llama2-70b: no region can start it from zero \(/);
    for (const r of REGIONS) expect(body.error.message).toContain(`cannot start from zero in region ${r}: llama2-70b/h100-80gb: no free GPU for an instance (needs 4 h100-80gb`);
    expect(body.error.message).not.toMatch(/telemetry/);
    // Refused by each region's first pass after the request arrived, not after the hold (controller.scaleToZero.holdMs, 60 s).
    expect(waitedMs).toBeLessThan(30_000);
    // The same through the openai client: an APIError with the status, the code and the header.
    const err = await client.chat.completions.create({ model: BIG, messages: [{ role: "user", content: "never" }], max_tokens: 4 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(err).toMatchObject({ status: 503, code: "no_capacity" });
    expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get("retry-after")).toBe("5");
    for (const r of REGIONS) expect(live(await regionListing(dev, r), BIG)).toHaveLength(0);
    const metrics = await (await fetch(`${dev.url}/metrics`)).text();
    for (const r of REGIONS) expect(metrics).toMatch(new RegExp(`tidegate_region_cold_refused_total\\{[^}]*region="${r}"[^}]*model="llama2-70b"[^}]*reason="no_capacity"[^}]*\\} 2\\n`));
    expect(dev.log()).toMatch(/"msg":"cold start refused"[^\n]*"model":"llama2-70b"[^\n]*"code":"no_capacity"/);
  }, 60_000);
});
