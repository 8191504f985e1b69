/**
 * Heap flatness of the region's request path over many requests (issue 32 item 6: the region's heap grew 1.3 MB over
 * 3,125 requests while every finished request stayed "running"). Streams `--requests` requests through one Gateway,
 * `--concurrency` at a time, each consumer stopping at `done` the three ways the tiers do (the router's relay: no
 * `return()`; the gRPC servers: `return()` after done; a `for await` that breaks), and samples the heap after a full
 * GC at every tenth of the run. Prints one JSON line:
 *
 *   { engine, requests, elapsedMs, requestsPerS, heapSamples: [{ requests, heapUsedBytes }],
 *     growthBytes (last sample − the sample after the first tenth, the warm-up), slopeBytesPerRequest (least
 *     squares over the samples after warm-up), inFlight (the gateway's, at the end), engineRunning (the engine's
 *     stats().running at the end) }
 *
 * Engines: `fast` (default; four in-process instances of FastEngine below, tokens back to back: the gateway alone,
 * 100,000 requests in seconds) or `openai-http` (the adapter against a `tidegate engine-sim` child process this
 * script starts at ×0.01 time, the path the issue measured). Needs `node --expose-gc`:
 *
 *   node --expose-gc dist/test/region/gateway-heap.js --requests 100000 [--engine fast|openai-http] [--concurrency 64]
 *
 * test/region/gateway-heap.test.ts runs it and holds it to bounds.
 */
import { parseArgs } from "node:util";
import { WallClock } from "../../core/clock.js";
import { makeUsage } from "../../core/openai.js";
import type { Engine, EngineEvent, EngineStats, GenerateRequest } from "../../core/ports.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import { Gateway } from "../../region/gateway/gateway.js";
import { spawnTidegate, stopAll } from "../e2e/procs.js";

const MODEL = "llama3.1-8b";

/**
 * An in-process engine as fast as an engine can be, shaped like the openai-http adapter: its per-request books
 * (in flight, remaining tokens) close in the stream's `finally`, so a stream left suspended after `done` shows as a
 * request still running. Keeps nothing per request (FakeEngine records every request: that would be the heap's
 * growth).
 */
class FastEngine implements Engine {
  readonly model = MODEL;
  inFlight = 0;
  private remaining = 0;
  private generated = 0;
  constructor(readonly instanceId: string) {}

  async *generate(req: GenerateRequest): AsyncGenerator<EngineEvent, void, undefined> {
    const budget = req.promptTokens + req.maxTokens;
    this.inFlight++;
    this.remaining += budget;
    try {
      for (let i = 0; i < req.maxTokens; i++) {
        this.generated++;
        yield { type: "token", text: " tide", tokens: 1 };
      }
      yield { type: "done", finishReason: "length", usage: makeUsage(req.promptTokens, req.maxTokens) };
    } finally {
      this.inFlight--;
      this.remaining -= budget;
    }
  }

  stats(): EngineStats {
    return { kvBytesUsed: 0, kvBytesCapacity: 1e9, running: this.inFlight, waiting: 0, remainingTokens: this.remaining, generatedTokensTotal: this.generated };
  }

  async close(): Promise<void> {}
}

/** One heap sample: requests finished so far and heapUsed after a full GC. */
export interface HeapSample {
  requests: number;
  heapUsedBytes: number;
}

/** The JSON line this script prints. */
export interface HeapReport {
  engine: "fast" | "openai-http";
  requests: number;
  elapsedMs: number;
  requestsPerS: number;
  heapSamples: HeapSample[];
  growthBytes: number;
  slopeBytesPerRequest: number;
  inFlight: number;
  engineRunning: number;
}

type Consumer = "relay" | "return-after-done" | "for-await-break";
const CONSUMERS: readonly Consumer[] = ["relay", "return-after-done", "for-await-break"];

async function consume(events: AsyncIterable<EngineEvent>, how: Consumer): Promise<void> {
  if (how === "for-await-break") {
    for await (const ev of events) if (ev.type === "done") break;
    return;
  }
  const it = events[Symbol.asyncIterator]();
  for (;;) {
    const step = await it.next();
    if (step.done === true || step.value.type === "done") break;
  }
  if (how === "return-after-done") await it.return?.();
}

/** Least-squares slope of heapUsedBytes over requests (bytes per request). */
export function slope(samples: readonly HeapSample[]): number {
  const n = samples.length;
  if (n < 2) return 0;
  const mx = samples.reduce((a, s) => a + s.requests, 0) / n;
  const my = samples.reduce((a, s) => a + s.heapUsedBytes, 0) / n;
  let num = 0;
  let den = 0;
  for (const s of samples) {
    num += (s.requests - mx) * (s.heapUsedBytes - my);
    den += (s.requests - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** Requests the engines count as running now (the adapter after a fresh /metrics scrape: its own in-flight count). */
async function engineRunning(engines: readonly Engine[]): Promise<number> {
  let n = 0;
  for (const e of engines) {
    if (e instanceof OpenAIHttpEngine) await e.scrape();
    n += e.stats().running;
  }
  return n;
}

function heapNow(gc: () => void): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { requests: { type: "string", default: "100000" }, engine: { type: "string", default: "fast" }, concurrency: { type: "string", default: "64" } } });
  const total = Number(values.requests);
  const concurrency = Number(values.concurrency);
  const kind = values.engine;
  if (!Number.isInteger(total) || total < 10) throw new RangeError(`--requests must be an integer ≥ 10, got ${values.requests}`);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`--concurrency must be an integer ≥ 1, got ${values.concurrency}`);
  if (kind !== "fast" && kind !== "openai-http") throw new RangeError(`--engine must be fast or openai-http, got ${kind}`);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with node --expose-gc: the heap is sampled after a full GC");

  const clock = new WallClock();
  const gw = new Gateway({ region: "r1", clock });
  const engines: Engine[] = [];
  if (kind === "fast") {
    for (let i = 0; i < 4; i++) engines.push(new FastEngine(`r1/fast-${i}`));
  } else {
    const sim = await spawnTidegate("engine-sim", ["engine-sim", "--model", MODEL, "--gpu", "h100-80gb", "--port", "0", "--time-scale", "0.01"], /^(http:\/\/127\.0\.0\.1:\d+)\n/m);
    engines.push(new OpenAIHttpEngine({ instanceId: "r1/e1", model: MODEL, baseUrl: sim.match[1]!, clock, metricsIntervalMs: 500, kvBytesCapacity: 1000 }));
  }
  for (const e of engines) gw.addInstance("h100-80gb", e);
  const body = { model: MODEL, messages: [{ role: "user", content: "hello there" }], max_tokens: 4 };
  const request = (i: number): GenerateRequest => ({ id: `heap-${i}`, model: MODEL, kind: "chat", promptTokens: 9, maxTokens: 4, priority: 0, body });

  const step = Math.ceil(total / 10);
  const samples: HeapSample[] = [];
  let next = 0;
  const startMs = Date.now();
  try {
    for (let upTo = step; next < total; upTo = Math.min(total, upTo + step)) {
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < upTo) {
            const i = next++;
            await consume(gw.generate(request(i)), CONSUMERS[i % CONSUMERS.length]!);
          }
        }),
      );
      samples.push({ requests: next, heapUsedBytes: heapNow(gc) });
    }
    const elapsedMs = Date.now() - startMs;
    const afterWarmup = samples.slice(1);
    const report: HeapReport = {
      engine: kind,
      requests: total,
      elapsedMs,
      requestsPerS: Math.round((total / elapsedMs) * 1000),
      heapSamples: samples,
      growthBytes: samples.at(-1)!.heapUsedBytes - samples[0]!.heapUsedBytes,
      slopeBytesPerRequest: Math.round(slope(afterWarmup) * 100) / 100,
      inFlight: gw.instances().reduce((a, i) => a + i.inFlight, 0),
      engineRunning: await engineRunning(engines),
    };
    process.stdout.write(JSON.stringify(report) + "\n");
  } finally {
    await gw.close();
    await stopAll();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`gateway-heap: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
