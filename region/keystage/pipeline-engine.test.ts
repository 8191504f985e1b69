import { describe, expect, it } from "vitest";
import { VirtualClock, WallClock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import { ValidationError } from "../../core/validate.js";
import { OpenAIHttpEngine } from "../../engines/openai-http/openai-http-engine.js";
import { promSamples } from "../../engines/openai-http/sse.js";
import { EngineSimServer } from "../../engines/sim/http.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import { DEFAULT_CLUSTER, parseKeystageConfig } from "./keystage-config.js";
import { parsePipelineSpec, PipelineEngine, pipelineSpecFor, pipelineSpecJson, type PipelineSpec } from "./pipeline-engine.js";
import type { KeyStageParams } from "../strategies/keystage.js";

const MODEL = "llama2-70b";
const GPU = "h100-80gb";
const params = resolveStrategy("keystage").params as KeyStageParams;
const SPEC: PipelineSpec = { layersPerStage: [20, 20, 20, 20], profileTp: 4, hiddenSize: 8192, mode: "key-stage", params, cluster: DEFAULT_CLUSTER };

function request(id: string, promptTokens = 512, maxTokens = 64): GenerateRequest {
  return { id, model: MODEL, kind: "completion", promptTokens, maxTokens, priority: 0, body: {} };
}

/** Drains `generate` into an array while the virtual clock runs. */
function collect(engine: PipelineEngine, req: GenerateRequest, signal?: AbortSignal): { events: EngineEvent[]; settled: Promise<unknown> } {
  const events: EngineEvent[] = [];
  const settled = (async () => {
    for await (const ev of engine.generate(req, signal)) events.push(ev);
  })().then(
    () => undefined,
    (err: unknown) => err,
  );
  return { events, settled };
}

describe("PipelineEngine: a pipelined instance behind the Engine port", () => {
  it("an idle pipeline answers in the profiled time: the tokens, then done with usage", async () => {
    const clock = new VirtualClock(0);
    const engine = new PipelineEngine({ instanceId: "p0", model: MODEL, gpu: GPU, gpus: 8, spec: SPEC, clock });
    const req = request("r1", 512, 64);
    const run = collect(engine, req);
    const profiled = engine.pipeline.profiledMs(512, 64, DEFAULT_CLUSTER.networkBytesPerS);
    await clock.advanceTo(profiled - 1);
    expect(run.events).toHaveLength(0);
    // In the last stage: its replica holds the request's KV for 20 of 80 layers (2·80·8·128·2 B/token ÷ 80 × 20).
    expect(engine.stats()).toMatchObject({ remainingTokens: 576, running: 1, waiting: 0, kvBytesUsed: 576 * 4096 * 20 });
    await clock.advanceTo(profiled + 1);
    expect(await run.settled).toBeUndefined();
    expect(run.events.filter((e) => e.type === "token")).toHaveLength(64);
    expect(run.events.at(-1)).toEqual({ type: "done", finishReason: "length", usage: { prompt_tokens: 512, completion_tokens: 64, total_tokens: 576 } });
    const s = engine.stats();
    expect(s).toMatchObject({ running: 0, waiting: 0, remainingTokens: 0, generatedTokensTotal: 64, kvBytesUsed: 0 });
    // Capacity: each replica a GPU's 90% less its stage's weights (35 GB); the scaler may have grown stages
    // while the 7.8 s request ran (it keeps grown replicas within the instance's GPUs).
    const replicas = engine.status().stages.reduce((a, st) => a + st.replicas, 0);
    expect(replicas).toBeGreaterThanOrEqual(4);
    expect(s.kvBytesCapacity).toBeCloseTo(replicas * (80 * 1024 ** 3 * 0.9 - 35e9), -3);
    await engine.close();
  });

  it("a burst makes the key-stage scaler grow stages within the instance's GPUs", async () => {
    const clock = new VirtualClock(0);
    const engine = new PipelineEngine({ instanceId: "p0", model: MODEL, gpu: GPU, gpus: 8, spec: SPEC, clock });
    expect(engine.status().stages.map((s) => s.replicas)).toEqual([1, 1, 1, 1]);
    const runs = Array.from({ length: 40 }, (_, i) => collect(engine, request(`b${i}`)));
    expect(engine.stats().waiting).toBe(39);
    let peak = 4;
    for (let t = 1000; t <= 120_000; t += 1000) {
      await clock.advanceTo(t);
      const st = engine.status();
      peak = Math.max(peak, st.stages.reduce((a, s) => a + s.replicas + s.starting, 0));
      expect(st.heldGpus).toBeLessThanOrEqual(8);
    }
    expect(peak).toBeGreaterThan(4);
    expect(engine.status().scaler.added).toBeGreaterThan(0);
    for (const r of runs) expect(await r.settled).toBeUndefined();
    expect(engine.status().completed).toBe(40);
    await engine.close();
  });

  it("an aborted request leaves the pipeline and never completes; closing fails the ones inside", async () => {
    const clock = new VirtualClock(0);
    const engine = new PipelineEngine({ instanceId: "p0", model: MODEL, gpu: GPU, gpus: 4, spec: SPEC, clock });
    const first = collect(engine, request("a"));
    const ac = new AbortController();
    const second = collect(engine, request("b"), ac.signal);
    await clock.advanceTo(1);
    expect(engine.stats().waiting).toBe(1);
    ac.abort(new TidegateError("cancelled", "client went away"));
    expect(((await second.settled) as TidegateError).code).toBe("cancelled");
    // It left stage 0's queue at once: nothing waits, the first request runs.
    expect(engine.stats()).toMatchObject({ remainingTokens: 576, waiting: 0, running: 1 });
    expect(engine.status().stages[0]!.queue).toBe(0);
    await clock.advanceTo(engine.pipeline.profiledMs(512, 64, DEFAULT_CLUSTER.networkBytesPerS) * 3);
    expect(await first.settled).toBeUndefined();
    expect(engine.status().completed).toBe(1);
    expect(second.events).toHaveLength(0);

    const third = collect(engine, request("c"));
    await clock.advanceTo(clock.now() + 1);
    await engine.close();
    const err = (await third.settled) as TidegateError;
    expect(err.code).toBe("upstream_error");
    expect(err.message).toContain("closed");
    expect(() => engine.submit(request("d"), {})).toThrow(/closed/);
  });

  it("--time-scale 0.5 halves every duration; callback form fires at the same time as the stream", async () => {
    const clock = new VirtualClock(0);
    const engine = new PipelineEngine({ instanceId: "p0", model: MODEL, gpu: GPU, gpus: 4, spec: SPEC, clock, timeScale: 0.5 });
    const at: number[] = [];
    engine.submit(request("s"), { onFirstToken: (t) => at.push(t), onDone: (t, n) => at.push(t, n) });
    const profiled = engine.pipeline.profiledMs(512, 64, DEFAULT_CLUSTER.networkBytesPerS);
    await clock.advanceTo(profiled / 2 + 1);
    expect(at).toHaveLength(3);
    expect(at[2]).toBe(64);
    await engine.close();
  });

  it("rejects requests it cannot serve", async () => {
    const engine = new PipelineEngine({ instanceId: "p0", model: MODEL, gpu: GPU, gpus: 4, spec: SPEC, clock: new VirtualClock(0) });
    expect(() => engine.submit({ ...request("x"), model: "bloom-176b" }, {})).toThrow(/serves llama2-70b/);
    expect(() => engine.submit(request("y", 4000, 200), {})).toThrow(/^This model's maximum context length is 4096 tokens\. However, you requested 4200 tokens/);
    await engine.close();
  });
});

describe("pipeline specs: from config, as JSON, and their errors", () => {
  it("config → spec: key-stage under the keystage strategy, whole-pipeline otherwise; JSON round-trips", () => {
    const ks = parseKeystageConfig({ pipelines: [{ model: MODEL, gpu: GPU, layersPerStage: [20, 20, 20, 20], profileTp: 4 }] })!;
    expect(pipelineSpecFor(ks, "keystage", MODEL, GPU)?.mode).toBe("key-stage");
    expect(pipelineSpecFor(ks, "lt-ua", MODEL, GPU)?.mode).toBe("whole-pipeline");
    expect(pipelineSpecFor(ks, "keystage", MODEL, "a100-80gb")).toBeUndefined();
    expect(pipelineSpecFor(undefined, "keystage", MODEL, GPU)).toBeUndefined();
    const spec = pipelineSpecFor(ks, "keystage", MODEL, GPU)!;
    expect(parsePipelineSpec(pipelineSpecJson(spec), MODEL, GPU, 8)).toEqual(spec);
  });

  it("bad specs are errors naming the path", () => {
    const json = (o: object) => JSON.stringify({ layersPerStage: [20, 20, 20, 20], profileTp: 4, ...o });
    const fails = (text: string, gpus: number, path: RegExp, msg: RegExp) => {
      try {
        parsePipelineSpec(text, MODEL, GPU, gpus);
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        expect((err as Error).message).toMatch(path);
        expect((err as Error).message).toMatch(msg);
        return;
      }
      throw new Error("expected a ValidationError");
    };
    fails("{", 8, /--pipeline/, /not JSON/);
    fails(json({ layersPerStage: [20, 20, 20] }), 8, /--pipeline\.layersPerStage/, /60 layers in all; llama2-70b has 80/);
    fails(json({}), 3, /--pipeline/, /3 GPUs cannot hold 4 stages/);
    fails(json({ params: { kp: 50 } }), 8, /--pipeline\.params\.kp/, /20/);
    fails(json({ mode: "sideways" }), 8, /--pipeline\.mode/, /key-stage/);
    fails(json({ extra: 1 }), 8, /--pipeline/, /extra/);
  });
});

describe("a pipelined engine seen over HTTP (engine-sim's face, the region's openai-http adapter)", () => {
  it("promSamples reads labelled samples, escapes included", () => {
    const text = ['# HELP m x', 'm{a="1",b="q\\"x\\\\y"} 2', "m 3", 'mm{a="1"} 9', 'm{a="2"} NaNx'].join("\n");
    expect(promSamples(text, "m")).toEqual([
      { labels: { a: "1", b: 'q"x\\y' }, value: 2 },
      { labels: {}, value: 3 },
    ]);
  });

  it("the adapter reads the split from /metrics as the engine reports it: what the region's listing shows", async () => {
    const engine = new PipelineEngine({ instanceId: "p0", model: MODEL, gpu: GPU, gpus: 6, spec: { ...SPEC, layersPerStage: [32, 16, 16, 16] }, clock: new WallClock(), timeScale: 0.01 });
    const server = new EngineSimServer({ engine });
    const url = await server.listen(0);
    const adapter = new OpenAIHttpEngine({ instanceId: "p0", model: MODEL, baseUrl: url, clock: new WallClock(), metricsIntervalMs: 0 });
    try {
      // A burst through the HTTP face, so stage 0 (twice the layers) queues and grows.
      const res = await Promise.all(
        Array.from({ length: 24 }, () => fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "x ".repeat(400), max_tokens: 16 }) })),
      );
      expect(res.every((r) => r.status === 200)).toBe(true);
      // Freeze the split (no more passes; replicas still starting come up) so the scrape and status() see one state.
      engine.scaler.stop();
      for (let i = 0; i < 200 && engine.status().stages.some((x) => x.starting > 0); i++) await new Promise((r) => setTimeout(r, 10));
      expect(await adapter.scrape()).toBe(true);
      const st = engine.status();
      expect(adapter.pipelineSummary()).toEqual({
        mode: "key-stage",
        budgetGpus: 6,
        heldGpus: st.heldGpus,
        stages: st.stages.map((x) => ({ replicas: x.replicas, starting: x.starting, queue: x.queue, key: x.key })),
        scaler: { added: st.scaler.added, removed: st.scaler.removed },
      });
      expect(st.scaler.added).toBeGreaterThan(0);
    } finally {
      await adapter.close();
      await server.close();
    }
  });
});

