/**
 * Health that survives load (issue 32 item 2), with a real `tidegate engine-sim` child (compiled CLI) behind the
 * openai-http adapter and the static region's engine-health watch: while /metrics never answers (a proxy holds every
 * scrape past its timeout) but tokens stream, the instance stays in service with its last stats marked stale; once
 * its connection is refused it is taken out.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WallClock } from "../../core/clock.js";
import { silentLogger } from "../../core/log.js";
import type { GenerateRequest, InstanceState } from "../../core/ports.js";
import { spawnTidegate, stopAll, type Proc } from "../../test/e2e/procs.js";
import { metricsProxy } from "../../test/helpers/metrics-proxy.js";
import type { Gateway } from "../../region/gateway/gateway.js";
import { watchEngineHealth } from "../../region/process/engine-health.js";
import { OpenAIHttpEngine } from "./openai-http-engine.js";

/** A proxy to `target` that leaves every /metrics request unanswered while `holdMetrics` (the adapter's scrape times out). */
async function slowMetricsProxy(target: string) {
  const state = { holdMetrics: false, held: 0 };
  const proxy = await metricsProxy(target, () => {
    if (!state.holdMetrics) return false;
    state.held++;
    return true; // never answered
  });
  return Object.assign(state, { url: proxy.url, close: proxy.close });
}

async function until(what: string, ok: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("engine health under load, against engine-sim", () => {
  let proc: Proc;
  beforeAll(async () => {
    // ×0.2 time scale: a decode step of about 1.4 ms, so a stream sends a token every few ms.
    proc = await spawnTidegate("engine-sim-load", ["engine-sim", "--model", "llama3.1-8b", "--gpu", "h100-80gb", "--port", "0", "--time-scale", "0.2"], /^(http:\/\/127\.0\.0\.1:\d+)\n/m);
  });
  afterAll(async () => {
    await proc.stop();
    await stopAll();
  });

  it("keeps an engine whose scrapes time out in service while it streams tokens, and ejects it once its connection is refused", async () => {
    const proxy = await slowMetricsProxy(proc.match[1]!);
    const clock = new WallClock();
    const engine = new OpenAIHttpEngine({ instanceId: "busy", model: "llama3.1-8b", baseUrl: proxy.url, clock, metricsIntervalMs: 200, scrapeTimeoutMs: 1000 });
    const states = new Map<string, InstanceState>([["busy", "serving"]]);
    const gateway = {
      instances: () => [...states].map(([instanceId, state]) => ({ instanceId, state })),
      setInstanceState: (id: string, s: InstanceState) => states.set(id, s),
      engineDown: () => 0,
      engineUp: () => undefined,
    } as unknown as Pick<Gateway, "instances" | "setInstanceState" | "engineDown" | "engineUp">;
    const watch = watchEngineHealth(gateway, [engine], clock, silentLogger, { intervalMs: 50, maxEjectedPercent: 50 });
    let tokens = 0;
    let streaming = true;
    const failures: unknown[] = [];
    const req = (id: string): GenerateRequest => ({ id, model: "llama3.1-8b", kind: "completion", promptTokens: 9, maxTokens: 2000, priority: 0, body: { model: "llama3.1-8b", prompt: "hello there", max_tokens: 2000 } });
    // Four streams, each started again as it ends, until told to stop.
    const streams = Array.from({ length: 4 }, async (_, s) => {
      for (let n = 0; streaming; n++) {
        try {
          for await (const ev of engine.generate(req(`load-${s}-${n}`))) if (ev.type === "token") tokens++;
        } catch (err) {
          if (streaming) failures.push(err);
          return;
        }
      }
    });
    // The watch never saw it out of service: checked on every pass, not just at the end.
    let ejectedWhileStreaming = false;
    const observer = setInterval(() => {
      if (streaming && states.get("busy") !== "serving") ejectedWhileStreaming = true;
    }, 10);
    try {
      await until("a first successful scrape", () => engine.metricsHealthy, 20_000);
      await until("tokens flowing", () => tokens > 0, 20_000);
      proxy.holdMetrics = true;
      // Three scrapes held past their timeout, and the stats stale, while tokens keep coming.
      await until("three held scrapes timed out and stale stats", () => proxy.held >= 4 && engine.stale, 30_000);
      const tokensAtStale = tokens;
      await until("tokens still flowing with stale stats", () => tokens > tokensAtStale + 100, 20_000);
      expect(failures).toEqual([]);
      expect(engine.healthy()).toBe(true);
      expect(engine.stats().stale).toBe(true);
      expect(states.get("busy")).toBe("serving");
      expect(ejectedWhileStreaming).toBe(false);
      expect(watch.down.size).toBe(0);
      // Streams end; the engine's address refuses connections: out of service, saying why.
      streaming = false;
      await Promise.all(streams);
      await proxy.close();
      await until("ejected after the refusal", () => states.get("busy") === "draining", 10_000);
      expect(engine.unhealthyReason()).toMatch(/connection (refused \(ECONNREFUSED\)|failed \(ECONNRESET\))/);
      await until("a refused scrape", () => /ECONNREFUSED/.test(engine.unhealthyReason() ?? ""), 10_000);
      expect([...watch.down]).toEqual(["busy"]);
    } finally {
      streaming = false;
      clearInterval(observer);
      watch.stop();
      await engine.close();
      await proxy.close().catch(() => undefined);
    }
  }, 90_000);
});
