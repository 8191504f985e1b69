// Scale to zero and back with real processes on loopback (issue 33): `tidegate global`, one `tidegate region` in
// agents mode with controller.scaleToZero on, `tidegate agent`s whose engine-sim engines start once their model's
// blocks arrived over the native data plane. Model A is at zero instances (minInstances 0): a streaming request
// through the global router is held at the region while A comes up — the first time from a peer's copy (multicast;
// the node holding the pool's copy of A has no free slot), the second from the host copy its drained instance left
// behind — and A returns to zero after its idle window each time. Model C can never come up (its instance needs more
// GPUs than any node has): with the idle drain on, GPUs may come back, so its request is held until holdMs and gets
// 503 model_cold with Retry-After and the reason the region last saw (no free GPU). The region's /metrics counts both
// cold starts by source and both held requests' TTFT.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RegionInstances } from "../../core/ports.js";
import type { ColdListing } from "../../region/gateway/slo-book.js";
import { stopAll } from "../e2e/procs.js";
import { ADMIN_KEY, Cluster, waitFor } from "./cluster.js";

const MiB = 1 << 20;
const A = "llama3.2-3b";
const B = "llama3.1-8b";
const C = "llama2-70b";
const GPU = "h100-80gb";
const IDLE_MS = 3000;
const HOLD_MS = 20_000;
const RETRY_AFTER_S = 7;
let dir: string;
let c: Cluster;
let client: OpenAI;

function config() {
  return {
    models: [
      { name: A, gpusPerInstance: { [GPU]: 2 } },
      { name: B, gpusPerInstance: { [GPU]: 2 } },
      { name: C, gpusPerInstance: { [GPU]: 4 } },
    ],
    regions: [
      {
        name: "r1",
        gpus: [{ type: GPU, count: 8 }],
        endpoints: [
          { model: A, gpu: GPU, instances: 0, minInstances: 0, maxInstances: 1 },
          { model: B, gpu: GPU, instances: 1, minInstances: 1, maxInstances: 1 },
          { model: C, gpu: GPU, instances: 0, minInstances: 0, maxInstances: 1 },
        ],
      },
    ],
    router: { port: 0, adminKeys: [ADMIN_KEY], telemetryStaleMs: 10_000 },
    controller: { strategy: "lt-i", reconcileIntervalMs: 200, retryInitialMs: 300, retryMaxMs: 2000, agentLostAfterMs: 3000, scaleToZero: { idleMs: IDLE_MS, holdMs: HOLD_MS, maxHeld: 8, retryAfterS: RETRY_AFTER_S } },
    engines: { timeScale: 1, startTimeoutMs: 20_000, stopGraceMs: 3000 },
    parameters: { blockCount: 16, stallMs: 1000, models: { [A]: { bytes: 16 * MiB, seed: 21 }, [B]: { bytes: 16 * MiB, seed: 22 }, [C]: { bytes: 16 * MiB, seed: 23 } } },
  };
}

const live = (l: RegionInstances, model: string) => l.instances.filter((i) => i.model === model && i.state !== "spot");
const coldOf = (l: RegionInstances) => (l as RegionInstances & { cold?: ColdListing }).cold;

/** One streamed request for A through the global router: its first-token time (ms from sending) and its text. */
async function streamA(): Promise<{ ttftMs: number; text: string }> {
  const sent = Date.now();
  let ttftMs = -1;
  let text = "";
  const s = await client.chat.completions.create({ model: A, messages: [{ role: "user", content: "wake up" }], stream: true, max_tokens: 8 });
  for await (const chunk of s) {
    const t = chunk.choices[0]?.delta.content ?? "";
    if (t !== "" && ttftMs < 0) ttftMs = Date.now() - sent;
    text += t;
  }
  return { ttftMs, text };
}

/** Waits until A is back at zero: no instance but spot, and the listing's idle time past the window. */
async function atZero(): Promise<RegionInstances> {
  return waitFor("A back at zero", async () => {
    const l = await c.listing().catch(() => undefined);
    return l !== undefined && live(l, A).length === 0 && l.instances.some((i) => i.model === A && i.state === "spot") ? l : undefined;
  }, 30_000, () => c.region.output().slice(-4000));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-zero-"));
  // n1 alone first: B's instance and the pool's copy of every model land there, so n1 has no free slot left.
  c = new Cluster({ dir, region: "r1", config: config(), withGlobal: true, agents: [{ nodeId: "n1", host: "127.0.0.1", slots: 2 }] });
  await c.start();
  client = new OpenAI({ baseURL: `${c.routerUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
  await c.serving(B, 1, 60_000);
  await waitFor("the pool's copy of A on n1", async () => ((await c.listing()).nodes.find((n) => n.nodeId === "n1")?.completeModels.includes(A) === true ? true : undefined), 60_000, () => c.region.output().slice(-4000));
  await c.startAgent({ nodeId: "n2", host: "127.0.0.1", slots: 2 });
  await waitFor("n2 joined", async () => ((await c.listing()).nodes.find((n) => n.nodeId === "n2" && !n.lost) ? true : undefined), 20_000);
}, 180_000);

afterAll(async () => {
  await c?.stop();
  await stopAll();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe("scale to zero and back (global + region + agents on loopback)", () => {
  it("a model at zero answers a streaming request after a cold start from a peer, then from the host copy, and returns to zero after its idle window each time", async () => {
    const start = await c.listing();
    expect(live(start, A)).toHaveLength(0);
    expect(start.nodes.find((n) => n.nodeId === "n2")?.models ?? []).not.toContain(A);

    // 1: from a peer — n1 holds A's blocks but no free slot; n2 has slots and no copy: a multicast from n1.
    const first = await streamA();
    expect(first.text.length).toBeGreaterThan(0);
    const l1 = await c.listing();
    const starts1 = coldOf(l1)?.starts.filter((s) => s.model === A) ?? [];
    expect(starts1.map((s) => s.source)).toEqual(["peer"]);
    const node1 = l1.instances.find((i) => i.id === starts1[0]!.instanceId)?.node;
    expect(node1).toBe("n2");
    expect(c.logLines<{ model: string; completed: string[] }>("transfer finished").some((t) => t.model === A && t.completed.includes("n2"))).toBe(true);
    // The first token waited for the load: at least the cold start's own time less the hops.
    expect(first.ttftMs).toBeGreaterThanOrEqual(starts1[0]!.tookMs - 1000);
    const z1 = await atZero();
    expect(z1.actions.some((a) => a.model === A && a.kind === "drain" && a.reason === "idle")).toBe(true);

    // 2: from the host copy — the drained instance kept its slots and blocks on n2 (spot); reclaiming it loads nothing.
    const transfersBefore = c.logLines<{ model: string }>("transfer finished").filter((t) => t.model === A).length;
    const second = await streamA();
    expect(second.text.length).toBeGreaterThan(0);
    const l2 = await c.listing();
    const starts2 = coldOf(l2)?.starts.filter((s) => s.model === A) ?? [];
    expect(starts2.map((s) => s.source)).toEqual(["peer", "host"]);
    expect(c.logLines<{ model: string }>("transfer finished").filter((t) => t.model === A)).toHaveLength(transfersBefore);
    console.log(`cold starts of ${A}: peer ${starts1[0]!.tookMs.toFixed(0)} ms (first token ${first.ttftMs} ms), host ${starts2[1]!.tookMs.toFixed(0)} ms (first token ${second.ttftMs} ms)`);
    await atZero();

    // The router counts both as served.
    const metrics = await (await fetch(`${c.routerUrl}/metrics`)).text();
    expect(metrics).toMatch(/tidegate_router_requests_total\{[^}]*model="llama3\.2-3b"[^}]*status="200"[^}]*\} 2/);
    // The region's /metrics counts each cold start by its source, and both held requests' cold-start TTFT.
    const regionMetrics = await (await fetch(`${c.regionMetricsUrl}/metrics`)).text();
    for (const source of ["peer", "host"]) expect(regionMetrics).toMatch(new RegExp(`tidegate_region_cold_starts_total\\{[^}]*model="llama3\\.2-3b"[^}]*source="${source}"[^}]*\\} 1\\n`));
    expect(regionMetrics).toMatch(/tidegate_region_cold_start_ttft_seconds_count\{[^}]*model="llama3\.2-3b"[^}]*\} 2\n/);
  }, 240_000);

  it("a hold beyond holdMs ends in 503 model_cold with Retry-After and why the model did not come up", async () => {
    const sent = Date.now();
    const res = await fetch(`${c.routerUrl}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: C, messages: [{ role: "user", content: "never" }], stream: true, max_tokens: 4 }) });
    const waited = Date.now() - sent;
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe(String(RETRY_AFTER_S));
    expect(body.error.code).toBe("model_cold");
    expect(body.error.message).toMatch(/within 20000 ms \(controller\.scaleToZero\.holdMs\): llama2-70b\/h100-80gb: no free GPU for an instance \(needs 4 h100-80gb, 0 free/);
    expect(waited).toBeGreaterThanOrEqual(HOLD_MS - 500);
    const l = await c.listing();
    expect(live(l, C)).toHaveLength(0);
  }, 120_000);
});
