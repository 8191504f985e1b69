/**
 * Honest health and stale signals, with real processes (compiled CLI):
 * - the router's readiness answers 503 within router.telemetryStaleMs once its only region is gone, and 200 again
 *   after the region returns; liveness stays 200;
 * - a region whose engine's /metrics fails marks that engine stale within 2 s (region /metrics, telemetry), routes
 *   every request around it, and takes it back once its /metrics answers again;
 * - `kill -9` of a region running `--spawn-engines` leaves no engine process behind (the keepers stop them).
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";
import { metricsProxy } from "../helpers/metrics-proxy.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-health-"));
const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  await stopAll();
  await Promise.all(closers.map((c) => c()));
  rmSync(dir, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return { value: v, ms: Date.now() - start };
    } catch (err) {
      last = err;
    }
    if (Date.now() - start > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms (${String(last)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The value of one sample in a Prometheus text page (undefined when absent). */
function sample(text: string, name: string, labels: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

/** A proxy to `target` whose /metrics answers 500 while `failing`. */
async function flakyMetricsProxy(target: string): Promise<{ url: string; failing: boolean }> {
  const state = { url: "", failing: false };
  const proxy = await metricsProxy(target, (_req, res) => {
    if (!state.failing) return false;
    res.writeHead(500).end("metrics broken");
    return true;
  });
  closers.push(proxy.close);
  state.url = proxy.url;
  return state;
}

/** `n` concurrent completions (so JSQ spreads them over every instance it may use). */
async function completions(routerUrl: string, n: number): Promise<void> {
  await Promise.all(Array.from({ length: n }, async () => {
    const r = await fetch(`${routerUrl}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "llama3.2-3b", prompt: "hello there", max_tokens: 3 }) });
    expect(r.status).toBe(200);
    await r.arrayBuffer();
  }));
}

const served = async (engineUrl: string) => sample(await (await fetch(`${engineUrl}/metrics`)).text(), "vllm:request_success_total", `model_name="llama3.2-3b",finished_reason="length"`) ?? 0;

describe("health and stale signals", () => {
  it("router readiness follows region telemetry; a region routes around an engine whose /metrics fails", async () => {
    const engineA = await spawnTidegate("engine-sim", ["engine-sim", "--model", "llama3.2-3b", "--port", "0", "--time-scale", "0.05"], /(http:\/\/\S+)\n/);
    const engineB = await spawnTidegate("engine-sim", ["engine-sim", "--model", "llama3.2-3b", "--port", "0", "--time-scale", "0.05"], /(http:\/\/\S+)\n/);
    const a = engineA.match[1]!;
    const b = engineB.match[1]!;
    const proxy = await flakyMetricsProxy(b);
    const grpcPort = await freePort();
    const config = join(dir, "fleet.json");
    writeFileSync(
      config,
      JSON.stringify({
        models: [{ name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } }],
        regions: [{ name: "r1", grpcAddress: `127.0.0.1:${grpcPort}`, gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.2-3b", gpu: "h100-80gb", instances: 2 }] }],
        router: { telemetryStaleMs: 1500 },
        engines: { kind: "openai-http", urls: { "r1/llama3.2-3b": [a, proxy.url] } },
      }),
    );
    const startRegion = () => spawnTidegate("region", ["region", "--config", config, "--region", "r1", "--metrics-port", "0"], /tidegate region r1: grpc \S+ metrics (http:\/\/\S+)/);
    let region: Proc = await startRegion();
    const global = await spawnTidegate("global", ["global", "--config", config, "--port", "0", "--telemetry-interval-ms", "200"], /serving (http:\/\/\S+) /);
    const routerUrl = global.match[1]!;
    const status = async (path: string) => (await fetch(`${routerUrl}${path}`)).status;
    await until("router ready", async () => ((await status("/readyz")) === 200 ? true : undefined), 10_000);
    expect(await status("/healthz")).toBe(200);
    const regionMetrics = () => fetch(`${region.match[1]}/metrics`).then((r) => r.text());
    await until("region ready", async () => ((await fetch(`${region.match[1]}/readyz`)).status === 200 ? true : undefined), 10_000);

    // B's /metrics fails: stale within 2 s, in the region's metrics and readiness detail, and routed around.
    proxy.failing = true;
    const stale = await until("engine B stale", async () => (sample(await regionMetrics(), "tidegate_region_instances_stale", `region="r1",model="llama3.2-3b"`) === 1 ? true : undefined), 5000);
    // Noticed by the next /metrics read (every 500 ms) and shown by the next gauge refresh (every 500 ms).
    expect(stale.ms).toBeLessThan(2000);
    const [beforeA, beforeB] = [await served(a), await served(b)];
    await completions(routerUrl, 6);
    expect((await served(a)) - beforeA).toBe(6);
    expect((await served(b)) - beforeB).toBe(0);
    // A stale engine's usage is not zero: the region reports the endpoint as fully used by it.
    expect(sample(await regionMetrics(), "tidegate_region_effective_memory_utilization", `region="r1",model="llama3.2-3b"`)).toBeGreaterThanOrEqual(0.5);

    // Reads succeed again: back in rotation.
    proxy.failing = false;
    // Fresh again, and (the engine-health watch drains an engine whose scrapes fail) serving again.
    await until("engine B fresh and serving", async () => {
      const m = await regionMetrics();
      return sample(m, "tidegate_region_instances_stale", `region="r1",model="llama3.2-3b"`) === 0 && sample(m, "tidegate_region_instances", `region="r1",model="llama3.2-3b",state="serving"`) === 2 ? true : undefined;
    }, 3000);
    await completions(routerUrl, 8);
    expect((await served(b)) - beforeB).toBeGreaterThan(0);

    // No region: the router is not ready within telemetryStaleMs (+ slack for the stream to notice), but alive.
    expect(await region.stop()).toBe(0);
    const down = await until("router not ready", async () => ((await status("/readyz")) === 503 ? true : undefined), 1500 + 1500);
    expect(down.ms).toBeLessThanOrEqual(3000);
    expect(await status("/livez")).toBe(200);
    const body = (await (await fetch(`${routerUrl}/healthz`)).json()) as { status: string };
    expect(body.status).toBe("no region with fresh telemetry");

    // The region returns on its address: ready again.
    region = await startRegion();
    await until("router ready again", async () => ((await status("/readyz")) === 200 ? true : undefined), 15_000);
  });

  it("kill -9 of a region with --spawn-engines leaves no engine process behind", async () => {
    const config = join(dir, "spawn.json");
    writeFileSync(
      config,
      JSON.stringify({
        models: [{ name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } }],
        regions: [{ name: "r1", grpcAddress: "127.0.0.1:0", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.2-3b", gpu: "h100-80gb", instances: 2 }] }],
        controller: { actuator: "static" },
      }),
    );
    const region = await spawnTidegate("region", ["region", "--config", config, "--region", "r1", "--spawn-engines"], /tidegate region r1: grpc/);
    const engines = descendants(region.child.pid!).filter((p) => cmdline(p).includes("engine-sim"));
    expect(engines.length).toBeGreaterThanOrEqual(2);
    region.child.kill("SIGKILL");
    await until("every engine-sim of the killed region gone", async () => (engines.every((p) => !alive(p)) ? true : undefined), 10_000);
    expect(engines.filter(alive)).toEqual([]);
  });
});

/** Every process below `pid` (Linux /proc). */
function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      parent.set(Number(e), Number(readFileSync(`/proc/${e}/stat`, "utf8").split(") ")[1]!.split(" ")[1]));
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of parent) if (pp === p) (out.push(c), walk(c));
  };
  walk(pid);
  return out;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
  } catch {
    return "";
  }
}

/** Alive and not a zombie. */
function alive(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[0];
    return state !== "Z";
  } catch {
    return false;
  }
}
