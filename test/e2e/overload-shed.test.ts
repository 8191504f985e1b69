/**
 * Issue 32 item 1 over real processes: `tidegate global` in front of one `tidegate region` whose one engine-sim child
 * runs at most 4 requests at once (`engines.models.<m>.maxBatch`). A burst of 24 streams from two tenants: the router's
 * adaptive limit, which starts at the engines' ceiling from the region's telemetry (1 instance × 4), admits what the
 * engine can run and answers the rest at once with `429` `rate_limited` and `Retry-After` — none of them waits for a
 * timeout, every admitted stream completes, the engine is never taken out of service — and the router serves again
 * once the burst has passed. `bench:overload` measures the same path under a sustained 3× overload.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, spawnTidegate, stopAll, type Proc } from "./procs.js";

const MODEL = "llama3.2-3b";
const KEYS = { a: "tg-overload-test-key-a", b: "tg-overload-test-key-b" } as const;
let dir: string;
let routerUrl: string;
let region: Proc;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "tidegate-overload-"));
  const port = await freePort();
  const configFile = join(dir, "config.json");
  writeFileSync(
    configFile,
    JSON.stringify({
      models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 2 } }],
      regions: [{ name: "us-east", grpcAddress: `127.0.0.1:${port}`, gpus: [{ type: "h100-80gb", count: 2 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 }] }],
      router: { port: 0, apiKeys: [{ key: KEYS.a, tenant: "a" }, { key: KEYS.b, tenant: "b" }] },
      controller: { actuator: "static" },
      engines: { kind: "sim", timeScale: 4, models: { [MODEL]: { maxBatch: 4 } } },
    }),
  );
  region = await spawnTidegate("region us-east", ["region", "--config", configFile, "--region", "us-east", "--spawn-engines", "--log-level", "warn"], /grpc \S+ metrics/);
  const global = await spawnTidegate("global", ["global", "--config", configFile, "--port", "0", "--log-level", "warn"], /serving (http:\/\/127\.0\.0\.1:\d+)/);
  routerUrl = global.match[1]!;
  // Available, and the limit set from the region's telemetry (its ceiling: 1 instance × 4).
  const deadline = Date.now() + 30_000;
  for (;;) {
    const text = await (await fetch(`${routerUrl}/metrics`)).text();
    if (/^tidegate_router_concurrency_limit\{region="us-east",model="llama3.2-3b"\} 4$/m.test(text)) break;
    if (Date.now() > deadline) throw new Error(`the router's limit never came from the region's telemetry:\n${text.split("\n").filter((l) => l.includes("concurrency")).join("\n")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 90_000);

afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

interface Outcome {
  status: number;
  ms: number;
  retryAfter: string | null;
  code: string | undefined;
  done: boolean;
}

async function stream(tenant: keyof typeof KEYS): Promise<Outcome> {
  const t0 = Date.now();
  const res = await fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEYS[tenant]}` },
    body: JSON.stringify({ model: MODEL, prompt: "tell me about the tides", max_tokens: 24, stream: true }),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  const code = res.status === 200 ? undefined : (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  return { status: res.status, ms: Date.now() - t0, retryAfter: res.headers.get("retry-after"), code, done: text.includes("[DONE]") };
}

describe("overload: the router sheds at the engines' ceiling", () => {
  it("a burst of 24 streams: what the engine runs is served, the rest get 429 with Retry-After at once, the engine stays in service", async () => {
    const burst = await Promise.all(Array.from({ length: 24 }, (_, i) => stream(i % 3 === 2 ? "b" : "a")));
    const ok = burst.filter((o) => o.status === 200);
    const shed = burst.filter((o) => o.status === 429);
    expect(ok.length + shed.length, JSON.stringify(burst)).toBe(24);
    expect(ok.length).toBeGreaterThanOrEqual(4);
    expect(shed.length).toBeGreaterThan(0);
    for (const o of ok) expect(o.done).toBe(true);
    for (const o of shed) {
      expect(o.code).toBe("rate_limited");
      expect(o.retryAfter).toBe("1");
    }
    // Shed at once: every 429 came before the first admitted stream could finish (24 tokens at time scale 4).
    const firstDone = Math.min(...ok.map((o) => o.ms));
    for (const o of shed) expect(o.ms).toBeLessThan(firstDone);
    const metrics = await (await fetch(`${routerUrl}/metrics`)).text();
    const shedCount = [...metrics.matchAll(/^tidegate_router_shed_total\{model="llama3\.2-3b",limit="(concurrency|tenant_share)"\} (\S+)$/gm)].reduce((n, m) => n + Number(m[2]), 0);
    expect(shedCount).toBe(shed.length);
    expect(region.output()).not.toMatch(/taken out of service/);
  }, 60_000);

  it("after the burst the router serves again", async () => {
    const after = await stream("a");
    expect(after.status).toBe(200);
    expect(after.done).toBe(true);
  }, 30_000);
});
