/**
 * Every region shape honours every engines.* field that applies to it (issue 30). What applies where:
 *
 * | field                                   | simulated | static (in process / spawned) | agents in process | agents over gRPC          |
 * |-----------------------------------------|-----------|-------------------------------|-------------------|---------------------------|
 * | timeScale                               | ✓         | ✓ / --time-scale              | ✓                 | StartEngine → --time-scale|
 * | kvCapacityTokens (all models)           | ✓         | ✓ / --kv-capacity-tokens      | ✓                 | StartEngine → flag        |
 * | models[m].maxBatch, .kvCapacityTokens   | ✓         | ✓ / --max-batch, flag         | ✓                 | StartEngine → flags       |
 * | keystage.pipelines (PipelineEngine)     | ✓         | ✓ / --pipeline                | ✓                 | StartEngine → --pipeline  |
 * | preemption, batchSlotsBeside,           | ✓         | ✓ / --preemption,             | ✓                 | StartEngine (optional     |
 * | hostKvCacheGiB, routing.blockTokens     |           | --batch-slots-beside, …       |                   | fields 13–16) → flags     |
 * | kind ("sim" / "openai-http"), urls      | –         | picks the factory; urls only for openai-http                  | –                 | –        |
 * | commandTemplate                         | –         | –                             | – (simulated)     | ✓ (real engines get no sim settings) |
 * | startTimeoutMs, stopGraceMs             | –         | –                             | ✓                 | ✓                         |
 *
 * The first three shapes are built here and their engines read after start (time scale, batch cap, KV capacity,
 * pipeline or not). Agents over gRPC start engine-sim processes; they are covered through the shared pieces: the
 * StartEngine `settings` the actuator adds (EngineStartOptions.settings, which the in-process case exercises), the wire (AgentClient → agent server → the node's engine
 * host) and the engine-sim arguments the supervisor builds, which are the flags a spawned static engine gets.
 */
import "../config-sections.js"; // region's config sections (routing, keystage), before any config is parsed
import { afterEach, describe, expect, it } from "vitest";
import { VirtualClock, WallClock, type Clock } from "../../core/clock.js";
import { DEFAULT_CONFIG_JSON, parseConfig, type TidegateConfig } from "../../core/config.js";
import { silentLogger } from "../../core/log.js";
import { DEFAULT_MAX_BATCH } from "../../core/perf/model.js";
import { FakeEngine } from "../../test/helpers/fake-engine.js";
import { AgentClient } from "../../nodes/agent/client.js";
import { startAgentServer } from "../../nodes/agent/agent-server.js";
import { engineSimArgs } from "../../nodes/agent/engine-supervisor.js";
import type { AgentHandle, NodeEngineHost, EngineInfo, EngineSpec } from "../../nodes/agent/handle.js";
import { NodeAgent } from "../../nodes/agent/node.js";
import { SimEngine } from "../../engines/sim/sim-engine.js";
import { PipelineEngine, pipelineSpecJson } from "../keystage/pipeline-engine.js";
import { resolveStrategy } from "../strategies/strategy-registry.js";
import { agentsInProcess } from "./agents-host.js";
import { buildRegion, type Region } from "./build-region.js";
import { engineSettingsOf, engineSimFlags, simEngineParams } from "./build-sim-engine.js";
import { startSimRegion } from "./sim-region.js";
import { fixedEngines, simEngineFactory } from "./static-host.js";

const MiB = 1024 * 1024;
const NO_DELAYS = { spotMedianMs: 0, spotMaxMs: 0, spotSigma: 0, redeployLocalMs: 0, redeployRemoteMs: 0, vmProvisionMs: 0 };

/** Three endpoints: one with per-model settings, one with the global KV only, one pipelined (keystage). */
function config(): TidegateConfig {
  const base = DEFAULT_CONFIG_JSON as Record<string, unknown>;
  return parseConfig({
    ...base,
    models: [
      { name: "llama3.1-8b", gpusPerInstance: { "h100-80gb": 2 } },
      { name: "llama3.2-3b", gpusPerInstance: { "h100-80gb": 2 } },
      { name: "llama2-70b", gpusPerInstance: { "h100-80gb": 8 } },
    ],
    regions: [
      {
        name: "r",
        gpus: [{ type: "h100-80gb", count: 16 }],
        endpoints: [
          { model: "llama3.1-8b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 },
          { model: "llama3.2-3b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 },
          { model: "llama2-70b", gpu: "h100-80gb", instances: 1, minInstances: 1, maxInstances: 1 },
        ],
      },
    ],
    controller: { strategy: "lt-i", reconcileIntervalMs: 100, retryInitialMs: 200, retryMaxMs: 400, agentLostAfterMs: 1500 },
    engines: { timeScale: 0.05, startTimeoutMs: 5000, kvCapacityTokens: 5000, preemption: "swap", batchSlotsBeside: 3, hostKvCacheGiB: 2, models: { "llama3.1-8b": { maxBatch: 7, kvCapacityTokens: 3000 } } },
    routing: { blockTokens: 32 },
    keystage: { pipelines: [{ model: "llama2-70b", gpu: "h100-80gb", layersPerStage: [32, 16, 16, 16], profileTp: 4 }] },
    parameters: { blockCount: 8, models: { "llama3.1-8b": { bytes: 2 * MiB, origin: "pattern", seed: 1 }, "llama3.2-3b": { bytes: 2 * MiB, origin: "pattern", seed: 2 }, "llama2-70b": { bytes: 2 * MiB, origin: "pattern", seed: 3 } } },
  });
}

/** The engine serving `model` in the region's gateway. */
function engineOf(r: Region, model: string) {
  const id = r.gateway.instances().find((i) => i.model === model && i.state === "serving")?.instanceId;
  expect(id, `a serving ${model} instance`).toBeDefined();
  return r.gateway.engine(id!);
}

/** KV bytes per token (core/models.ts): llama3.1-8b 32 layers × 8 KV heads × 128 × 2 × 2 B; llama3.2-3b 28 × 8 × 128 × 2 × 2 B. */
const BYTES_PER_TOKEN_8B = 131_072;
const BYTES_PER_TOKEN_3B = 114_688;

/** engines.preemption "swap", batchSlotsBeside 3, routing.blockTokens 32 and hostKvCacheGiB 2 in one engine's core. */
function expectBehaviour(core: SimEngine["core"], bytesPerToken: number): void {
  expect(core.preemption).toBe("swap");
  expect(core["batchSlotsBeside"]).toBe(3);
  expect(core.prefixCache?.blockTokens).toBe(32);
  expect(core.prefixCache?.hostCapacityBlocks).toBe(Math.floor((2 * 2 ** 30) / (bytesPerToken * 32)));
}

/** What every shape must show: engines.* applied to each endpoint's engine. */
function expectEnginesHonoured(r: Region): void {
  const perModel = engineOf(r, "llama3.1-8b");
  expect(perModel).toBeInstanceOf(SimEngine);
  const a = (perModel as SimEngine).core;
  expect([a.timeScale, a.maxBatch, a.capacityTokens]).toEqual([0.05, 7, 3000]);
  const global = engineOf(r, "llama3.2-3b");
  expect(global).toBeInstanceOf(SimEngine);
  const b = (global as SimEngine).core;
  expect([b.timeScale, b.maxBatch, b.capacityTokens]).toEqual([0.05, DEFAULT_MAX_BATCH, 5000]);
  // engines.preemption, engines.batchSlotsBeside, routing.blockTokens and engines.hostKvCacheGiB (issues 34, 37).
  expectBehaviour(a, BYTES_PER_TOKEN_8B);
  expectBehaviour(b, BYTES_PER_TOKEN_3B);
  const pipe = engineOf(r, "llama2-70b");
  expect(pipe).toBeInstanceOf(PipelineEngine);
  expect((pipe as PipelineEngine)["opts"].timeScale).toBe(0.05);
  expect((pipe as PipelineEngine).status()).toMatchObject({ mode: "whole-pipeline", budgetGpus: 8 });
}

let open: Region | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

describe("every region shape honours engines.*", () => {
  it("simulated (the replays, dev's \"sim\")", async () => {
    const clock = new VirtualClock(0);
    const r = startSimRegion({ config: config(), region: "r", clock, delays: NO_DELAYS, weightsInRegion: ["llama3.1-8b", "llama3.2-3b", "llama2-70b"], random: () => 0.5, strategy: resolveStrategy("reactive", { outAbove: 2, inBelow: 0 }) });
    open = r as unknown as Region;
    clock.advanceToSync(0);
    expectEnginesHonoured(r as unknown as Region);
    // A caller's per-model engine settings (the replays' SimFleetOptions.engine) replace engines.models; the time scale stays the config's.
    const over = startSimRegion({ config: config(), region: "r", clock, delays: NO_DELAYS, weightsInRegion: [], random: () => 0.5, engine: () => ({ maxBatch: 3, kvCapacityTokens: 900 }) });
    const e = (engineOf(over as unknown as Region, "llama3.1-8b") as SimEngine).core;
    expect([e.timeScale, e.maxBatch, e.capacityTokens]).toEqual([0.05, 3, 900]);
    await over.close();
  });

  it("static, in-process engines (dev's \"static\", tidegate region with engines.kind sim)", async () => {
    const clock: Clock = new VirtualClock(0);
    const cfg = config();
    const r = buildRegion({ config: cfg, region: "r", clock, host: fixedEngines(simEngineFactory(cfg, clock)) });
    open = r;
    await r.ready();
    expectEnginesHonoured(r);
    expect(r.runtime.service.listing()).toMatchObject({ actuator: "static" });
  });

  it("agents in process (dev's default): engines started by the agents carry the settings", async () => {
    const r = buildRegion({ config: config(), region: "r", clock: new WallClock(), log: silentLogger, host: agentsInProcess({ gpusPerNode: 8, nodeMemoryBytes: 64 * MiB }) });
    open = r;
    await r.ready(20_000);
    expectEnginesHonoured(r);
  }, 30_000);

  it("agents over gRPC: the region adds the settings to StartEngine; the wire and engine-sim's arguments carry them", async () => {
    const cfg = config();
    // What the region sends: the actuator adds engineSettingsOf to StartEngine for engine-sim (the in-process case
    // above reads it back from the engines its agents built); here, the settings per model.
    const spec = (model: string, extra: Partial<EngineSpec> = {}): EngineSpec => ({ instanceId: `r/${model}`, model, gpu: "h100-80gb", gpus: 2, timeScale: cfg.engines.timeScale, ...extra });
    const behaviour = { preemption: "swap", batchSlotsBeside: 3, prefixBlockTokens: 32, hostKvCacheGiB: 2 };
    expect(["llama3.1-8b", "llama3.2-3b"].map((m) => engineSettingsOf(cfg, m))).toEqual([{ maxBatch: 7, kvCapacityTokens: 3000, ...behaviour }, { kvCapacityTokens: 5000, ...behaviour }]);

    // The wire: AgentClient → the agent's gRPC server → the node's engine host.
    const started: EngineSpec[] = [];
    const host: NodeEngineHost = {
      start: async (s) => (started.push(s), { instanceId: s.instanceId, model: s.model, gpu: s.gpu, gpus: s.gpus, url: "", pid: 0, state: "starting", startedAtMs: 0, detail: "" }),
      stop: async () => undefined,
      list: () => [],
      close: async () => {},
    };
    const node = NodeAgent.open({ nodeId: "n1", dataHost: "127.0.0.1", dataPort: 0, transport: "tcp", memoryBytes: 16 * MiB, log: silentLogger, engines: host, gpuSlots: 8, gpuType: "h100-80gb" });
    const server = await startAgentServer(node, "127.0.0.1:0", silentLogger);
    const client = new AgentClient(server.address, "n1");
    try {
      await client.startEngine({ ...spec("llama3.1-8b"), settings: engineSettingsOf(cfg, "llama3.1-8b"), awaitBlocks: true });
      expect(started.map((s) => [s.timeScale, s.settings])).toEqual([[0.05, { maxBatch: 7, kvCapacityTokens: 3000, ...behaviour }]]);
      // Zero is a setting, not an absent field: prefix caching and the host tier off, no batch beside.
      await client.startEngine({ ...spec("llama3.2-3b"), settings: { batchSlotsBeside: 0, prefixBlockTokens: 0, hostKvCacheGiB: 0 }, awaitBlocks: true });
      expect(started[1]!.settings).toEqual({ batchSlotsBeside: 0, prefixBlockTokens: 0, hostKvCacheGiB: 0 });
      // Unset stays unset: engine-sim's defaults.
      await client.startEngine(spec("llama3.1-8b", { instanceId: "r/plain", awaitBlocks: true }));
      expect("settings" in started[2]!).toBe(false);
      // The agent refuses what engine-sim would: a mode it does not know, an unknown field, a setting beside a pipeline.
      await expect(client.startEngine(spec("llama3.2-3b", { instanceId: "r/bad", settings: { preemption: "kill" as never } }))).rejects.toThrow(/settings\.preemption: must be one of recompute, swap, off/);
      await expect(client.startEngine(spec("llama3.2-3b", { instanceId: "r/bad1", settings: { maxBatchh: 3 } as never }))).rejects.toThrow(/settings\.maxBatchh/);
      await expect(client.startEngine(spec("llama3.2-3b", { instanceId: "r/bad2", pipeline: "{}", settings: { hostKvCacheGiB: 1 } }))).rejects.toThrow(/engine settings \(hostKvCacheGiB\) do not apply to a pipeline/);
    } finally {
      client.close();
      await server.close();
      await node.close();
    }

    // engine-sim's arguments from a StartEngine (agents) and from the config (a spawned static engine) agree.
    const args = engineSimArgs({ ...spec("llama3.1-8b"), settings: engineSettingsOf(cfg, "llama3.1-8b") }, { engineHost: "127.0.0.1", port: 1, parametersFrom: "a:1" });
    const flag = (argv: readonly string[], name: string) => argv[argv.indexOf(name) + 1];
    const spawned = engineSimFlags(simEngineParams(cfg, "llama3.1-8b", "h100-80gb"));
    for (const f of ["--time-scale", "--settings"]) expect([f, flag(args, f)]).toEqual([f, flag(spawned, f)]);
    expect(spawned.slice(0, 3)).toEqual(["--time-scale", "0.05", "--settings"]);
    expect(JSON.parse(spawned[3]!)).toEqual({ maxBatch: 7, kvCapacityTokens: 3000, ...behaviour });
    const piped = engineSimFlags(simEngineParams(cfg, "llama2-70b", "h100-80gb"));
    expect(piped.slice(0, 3)).toEqual(["--time-scale", "0.05", "--pipeline"]);
    expect(piped[3]).toBe(pipelineSpecJson(simEngineParams(cfg, "llama2-70b", "h100-80gb").pipeline!));
  });
});

describe("a static region runs the runtime over a fixed actuator", () => {
  it("holds and acknowledges targets without acting, refuses scaling by name, and lists stale engines", async () => {
    const clock = new VirtualClock(0);
    const cfg = parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), models: [{ name: "llama3.1-8b", gpusPerInstance: { "h100-80gb": 2 } }], regions: [{ name: "r", gpus: [{ type: "h100-80gb", count: 8 }], endpoints: [{ model: "llama3.1-8b", gpu: "h100-80gb", instances: 2 }] }] });
    let n = 0;
    const r = buildRegion({ config: cfg, region: "r", clock, host: fixedEngines(async (s) => new FakeEngine({ instanceId: s.instanceId, model: s.model, stats: { kvBytesUsed: 0, kvBytesCapacity: 100, stale: n++ === 1 } })) });
    open = r;
    await r.ready();
    expect(r.runtime.service.acceptTargets({ decisionId: 3, region: "r", madeAtMs: 0, advisory: false, endpoints: [{ model: "llama3.1-8b", gpu: "h100-80gb", instances: 5, forecastTokensPerS: 1 }] })).toEqual({ region: "r", decisionId: 3, accepted: true });
    expect(r.runtime.targets.latest()?.decisionId).toBe(3);
    await clock.advanceBy(10_000);
    expect(r.runtime.actions).toEqual([]);
    expect(r.actuator.instances().map((i) => i.state)).toEqual(["serving", "serving"]);
    expect(() => r.actuator.provision("llama3.1-8b", "h100-80gb", 2)).toThrow(/region r is static.*does not provision/);
    r.runtime.service.snapshot(); // a telemetry pass reads every engine's stats
    const listing = r.runtime.service.listing();
    expect(listing.actuator).toBe("static");
    expect(listing.instances.find((i) => i.id === "r/llama3.1-8b/h100-80gb/1")?.detail).toMatch(/stale/);
    // Telemetry's instance counts are the actuator's, which follow the gateway (the engine-health watch drains there).
    r.gateway.setInstanceState("r/llama3.1-8b/h100-80gb/0", "draining");
    expect(r.runtime.service.snapshot().models[0]!.instances).toMatchObject({ serving: 1, draining: 1 });
  });
});
