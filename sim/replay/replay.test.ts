import { describe, expect, it } from "vitest";
import { VirtualClock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig, type TidegateConfig } from "../../core/config.js";
import { MODEL_SPECS, kvBytesPerToken, type RegionName } from "../../core/models.js";
import type { GenerateRequest } from "../../core/ports.js";
import { defaultDataDir } from "../../core/paths.js";
import { getProfile } from "../../core/perf/model.js";
import { ShedError } from "../../router/admission.js";
import { dispatchWithRetry } from "../../router/relay.js";
import { assignRequests } from "./assign.js";
import { runReplay } from "./run.js";
import { readTrace, type Trace } from "./traces.js";
import { buildReplayWiring } from "./replay-wiring.js";

function oneModelConfig(): TidegateConfig {
  return parseConfig({
    models: [{ name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } }],
    regions: [{ name: "solo", gpus: [{ type: "h100-80gb", count: 4 }], endpoints: [{ model: "llama3.2-3b", gpu: "h100-80gb", instances: 2 }] }],
  });
}

describe("tidegate replay (trace path)", () => {
  it("times one request with the performance model: TTFT = prefill, E2E = prefill + Σ decode iterations", async () => {
    const trace: Trace = { name: "one", requests: [{ arrivalMs: 0, promptTokens: 1000, outputTokens: 10 }], spanMs: 0 };
    const res = await runReplay({ trace, config: oneModelConfig(), seed: 1 });
    const p = getProfile("llama3.2-3b", "h100-80gb", 2);
    const rec = res.records[0]!;
    expect(rec.error).toBeUndefined();
    expect(rec.region).toBe("solo");
    expect(rec.firstTokenMs - rec.arrivalMs).toBeCloseTo(p.prefillMs(1000), 9);
    let e2e = p.prefillMs(1000);
    for (let k = 0; k < 9; k++) e2e += p.decodeIterMs(1, 1001 + k);
    expect(rec.doneMs - rec.arrivalMs).toBeCloseTo(e2e, 6);
    expect(rec.outputTokens).toBe(10);
  });

  it("is deterministic and serves every request of the first 300 Azure conversation requests", async () => {
    const trace = readTrace("azure-conv", defaultDataDir());
    const config = parseConfig(DEFAULT_CONFIG_JSON);
    const a = await runReplay({ trace, config, seed: 3, limitRequests: 300 });
    const b = await runReplay({ trace, config, seed: 3, limitRequests: 300 });
    expect(a.records).toEqual(b.records);
    expect(a.records.filter((r) => r.error !== undefined)).toEqual([]);
    expect(a.records.length).toBe(300);
    for (const r of a.records) {
      expect(r.firstTokenMs).toBeGreaterThan(r.arrivalMs);
      expect(r.doneMs).toBeGreaterThanOrEqual(r.firstTokenMs);
    }
    // Every request was routed to a region that hosts its model, mostly its own (all regions are far below 0.70).
    expect(a.records.filter((r) => r.region === r.clientRegion).length).toBe(300);
  });

  it("feeds the same arrivals to live and replay wiring and gets the same routing decisions", async () => {
    // A load that crosses a low threshold so selection falls back across regions and JSQ spreads instances:
    // the first 400 Azure conversation requests, 20× compressed in time, on the dev fleet with threshold 0.004.
    const base = readTrace("azure-conv", defaultDataDir());
    const n = 400;
    const trace: Trace = { name: "compressed", requests: base.requests.slice(0, n).map((r) => ({ ...r, arrivalMs: r.arrivalMs / 20 })), spanMs: base.requests[n - 1]!.arrivalMs / 20 };
    const config = parseConfig({ ...(DEFAULT_CONFIG_JSON as object), router: { memoryThreshold: 0.004 } });
    const seed = 11;

    const replayed: string[] = new Array(n).fill("");
    const replay = await runReplay({ trace, config, seed, onRoute: (i, _region, instanceId) => (replayed[i] = instanceId) });

    // Live: the same classes, driven as the router drives them — dispatchWithRetry over the in-process links, the
    // Gateway's generate() and SimEngine.generate() streaming every token — on a virtual clock advanced with
    // microtasks drained, the stream consumed to the end.
    const clock = new VirtualClock(0);
    const w = buildReplayWiring(config, clock, { events: "per-token" });
    const assignments = assignRequests(trace.requests, config, seed);
    const live: string[] = new Array(n).fill("");
    let finished = 0;
    const inflight = () => new Map([...w.gateways.values()].flatMap((g) => g.instances().map((i) => [i.instanceId, i.inFlight] as const)));
    const arrive = (i: number) => {
      const r = trace.requests[i]!;
      const a = assignments[i]!;
      const req: GenerateRequest = { id: `r${i}`, model: a.model!, kind: "chat", promptTokens: r.promptTokens, maxTokens: r.outputTokens, priority: 0, body: {} };
      const before = inflight();
      const run = (async () => {
        const opened = await dispatchWithRetry({ selector: w.selector, links: w.links, req, clientRegion: a.clientRegion as RegionName, kvBytes: (r.promptTokens + r.outputTokens) * kvBytesPerToken(MODEL_SPECS[a.model!]!), signal: new AbortController().signal });
        for (;;) if ((await opened.next()).done === true) break;
        opened.release();
      })();
      run.then(() => finished++, (err: unknown) => {
        finished++;
        // Shed before any region took it (no region predicted its TTFT within the SLO: router/spill.ts): not routed,
        // as the replay records a request its walk ended without a region.
        live[i] = err instanceof ShedError ? "" : `error: ${String(err)}`;
      });
      for (const [id, k] of inflight()) if (k > (before.get(id) ?? 0)) live[i] = id;
    };
    trace.requests.forEach((r, i) => clock.at(r.arrivalMs, () => arrive(i)));
    for (let guard = 0; finished < n && guard < 5_000_000; guard++) {
      const next = clock.nextEventMs();
      if (next === undefined) break;
      await clock.advanceTo(next, 40);
    }
    const instances = [...w.gateways.values()].flatMap((g) => g.instances().map((i) => i.instanceId));
    await w.close();

    expect(finished).toBe(n);
    expect(live).toEqual(replayed);
    // The decisions are not trivial: every instance of every region took requests, and some left their client region.
    expect(instances.length).toBeGreaterThanOrEqual(6);
    expect(new Set(replayed.filter((x) => x !== ""))).toEqual(new Set(instances));
    expect(replay.records.filter((r) => r.region !== r.clientRegion).length).toBeGreaterThan(10);
  });
});
