/**
 * Issue 32 item 6: `tidegate_region_requests_running` counts running requests, not finished ones. Requests stream
 * through the region's Gateway into a real `tidegate engine-sim` behind the openai-http adapter, their consumers
 * stopping at `done` the three ways the tiers do — the router's relay (no `return()`: the stream stays suspended),
 * the gRPC servers (`return()` after done) and a `for await` that breaks — and afterwards the adapter's in-flight
 * count, the gateway's, the region telemetry's `running` and the region metric are all 0: in this process, and in a
 * `tidegate region` process reached over gRPC. Before the fix the gateway never closed the engine's stream, so each
 * finished request stayed "running" in the adapter (8,130 in the issue). Every wait is on a condition with a
 * deadline, not a sleep. Runs the compiled CLI (npm test builds first).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import { createRegistry } from "../../core/metrics.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import { promValue } from "../../engines/openai-http/sse.js";
import { Gateway } from "../../region/gateway/gateway.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import { RegionMetrics } from "../../region/process/region-metrics.js";
import { spawnTidegate, stopAll, type Proc } from "../e2e/procs.js";

const MODEL = "llama3.1-8b";
const RUNNING = `tidegate_region_requests_running{region="r1",model="${MODEL}"}`;

const dir = mkdtempSync(join(tmpdir(), "tidegate-running-"));
let engineSim: Proc;
let engineUrl: string;

beforeAll(async () => {
  // ×0.05 time: a 4-token request takes a few ms, a 4,000-token one about 1.4 s.
  engineSim = await spawnTidegate("engine-sim", ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--port", "0", "--time-scale", "0.05"], /^(http:\/\/127\.0\.0\.1:\d+)\n/m);
  engineUrl = engineSim.match[1]!;
});
afterAll(async () => {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

function request(id: string, maxTokens: number): GenerateRequest {
  return { id, model: MODEL, kind: "chat", promptTokens: 9, maxTokens, priority: 0, body: { model: MODEL, messages: [{ role: "user", content: "hello there" }], max_tokens: maxTokens } };
}

/** Polls `check` until it holds; fails with `what` and the last value after `timeoutMs`. */
async function waitFor<T>(what: string, read: () => T | Promise<T>, check: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (check(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** One value of a Prometheus text page (summed over label sets; `name` may carry its labels). */
async function scrape(url: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  if (!name.includes("{")) return promValue(text, name);
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

type Consumer = "relay" | "return-after-done" | "for-await-break";
const CONSUMERS: readonly Consumer[] = ["relay", "return-after-done", "for-await-break"];

/** Reads one request to its `done` and stops there the way `how` says; returns the events. */
async function consume(events: AsyncIterable<EngineEvent>, how: Consumer): Promise<EngineEvent[]> {
  const out: EngineEvent[] = [];
  if (how === "for-await-break") {
    for await (const ev of events) {
      out.push(ev);
      if (ev.type === "done") break;
    }
    return out;
  }
  const it = events[Symbol.asyncIterator]();
  for (;;) {
    const step = await it.next();
    if (step.done === true) break;
    out.push(step.value);
    if (step.value.type === "done") break;
  }
  if (how === "return-after-done") await it.return?.();
  return out;
}

describe("running requests return to 0 once they end (issue 32 item 6)", () => {
  it("in process: Gateway → openai-http adapter → engine-sim, whichever way the consumer stops at done", async () => {
    const clock = new WallClock();
    const engine = new OpenAIHttpEngine({ instanceId: "r1/e1", model: MODEL, baseUrl: engineUrl, clock, metricsIntervalMs: 200, kvBytesCapacity: 1000 });
    const outcomes: string[] = [];
    const gw = new Gateway({ region: "r1", clock, onOutcome: (_m, o) => outcomes.push(o) });
    gw.addInstance("h100-80gb", engine);
    const registry = createRegistry(false);
    const sink = new RegionMetrics({ r1: [MODEL] }, registry).sink("r1");
    const regionRunning = async () => {
      sink.observe(gw.snapshot(), undefined);
      return (await registry.getSingleMetric("tidegate_region_requests_running")!.get()).values.find((v) => v.labels.model === MODEL)?.value;
    };
    try {
      // The count is live, not stuck at 0: a long request shows as running while it runs.
      const long = consume(gw.generate(request("long", 4_000)), "relay");
      await waitFor("a running request to show in the region metric", regionRunning, (v) => v === 1);
      expect((await long).at(-1)).toMatchObject({ type: "done" });

      // 150 short requests, 8 at a time, each consumer kind in turn.
      const N = 150;
      let next = 0;
      const tokens: number[] = [];
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < N) {
            const i = next++;
            const evs = await consume(gw.generate(request(`short-${i}`, 4)), CONSUMERS[i % CONSUMERS.length]!);
            expect(evs.at(-1)).toMatchObject({ type: "done" });
            tokens.push(evs.filter((e) => e.type === "token").length);
          }
        }),
      );
      expect(tokens).toEqual(Array.from({ length: N }, () => 4));
      expect(outcomes.filter((o) => o === "ok")).toHaveLength(N + 1);

      // The gateway's books close at done; the adapter's once the engine's stream was returned.
      expect(gw.instances()[0]!.inFlight).toBe(0);
      expect(engine.stats().remainingTokens).toBe(0);
      await waitFor("the engine to report no running request", () => scrape(engineUrl, "vllm:num_requests_running"), (v) => v === 0);
      await waitFor("the adapter's running count", () => engine.stats().running, (v) => v === 0);
      expect(await regionRunning()).toBe(0);
      expect(gw.snapshot().models[0]!.running).toBe(0);
    } finally {
      await gw.close();
    }
  });

  it("in a `tidegate region` process (static, openai-http engine by URL): its metric returns to 0 over gRPC", async () => {
    const config = join(dir, "region.json");
    writeFileSync(
      config,
      JSON.stringify({
        models: [{ name: MODEL, gpusPerInstance: { "h100-80gb": 1 } }],
        regions: [{ name: "r1", grpcAddress: "127.0.0.1:0", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: MODEL, gpu: "h100-80gb", instances: 1 }] }],
        controller: { actuator: "static" },
        engines: { kind: "openai-http", urls: { [`r1/${MODEL}`]: [engineUrl] } },
      }),
    );
    const region = await spawnTidegate("region r1", ["region", "--config", config, "--region", "r1", "--grpc-port", "0", "--log-level", "warn"], /tidegate region r1: grpc (\S+) metrics (\S+)/, 30_000);
    const metricsUrl = region.match[2]!;
    const link = new GrpcRegionLink({ region: "r1", address: region.match[1]!, telemetryIntervalMs: 100 });
    try {
      const long = consume(link.dispatch(request("proc-long", 4_000)), "for-await-break");
      await waitFor("a running request to show in the region metric", () => scrape(metricsUrl, RUNNING), (v) => v === 1);
      expect((await long).at(-1)).toMatchObject({ type: "done" });

      const N = 120;
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < N) {
            const i = next++;
            const evs = await consume(link.dispatch(request(`proc-short-${i}`, 4)), CONSUMERS[i % CONSUMERS.length]!);
            expect(evs.at(-1)).toMatchObject({ type: "done" });
          }
        }),
      );
      await waitFor("the region's requests_total", () => scrape(metricsUrl, `tidegate_region_requests_total{region="r1",model="${MODEL}",outcome="ok"}`), (v) => v === N + 1);
      await waitFor("tidegate_region_requests_running", () => scrape(metricsUrl, RUNNING), (v) => v === 0);
      expect(await scrape(engineUrl, "vllm:num_requests_running")).toBe(0);
    } finally {
      await link.close();
      expect(await region.stop()).toBe(0);
    }
  });
});
