/** The `engines` section: which engines serve (simulated or OpenAI-compatible HTTP) and how they start and stop. */
import { ValidationError, present, type ObjectReader } from "../validate.js";
import type { ModelConfig } from "./models-section.js";

export interface EnginesConfig {
  kind: "sim" | "openai-http";
  /**
   * With the agents actuator: the command agents run for a real engine, e.g. "vllm serve {model} --port {port}"
   * (placeholders {model} {port} {host} {gpu} {tp} {instance}); absent = `tidegate engine-sim`.
   */
  commandTemplate?: string;
  /** How long a started engine may take to answer its health check. */
  startTimeoutMs: number;
  /** SIGTERM → SIGKILL grace when an engine is stopped. */
  stopGraceMs: number;
  /**
   * KV capacity (tokens) of in-process simulated engines (dev's, a static region's); absent = GPU memory × 0.9 −
   * weights. A smaller figure makes a small model's memory fill under a modest load (the burst test uses it).
   */
  kvCapacityTokens?: number;
  /**
   * Per-model settings of simulated engines, over `kvCapacityTokens`: vLLM's max_num_seqs (`maxBatch`, default 256)
   * and the KV cache in tokens. The router's in-flight estimate uses the same capacity (router/selector.ts).
   */
  models: Record<string, SimEngineModelConfig>;
  /** For `sim`: multiply simulated durations (1 = real time as measured; 0.01 = 100× faster). */
  timeScale: number;
  /**
   * For `sim`: what a priority 0 request short of KV or a batch slot does while batch (priority 1) requests run —
   * "recompute" (default; vLLM priority scheduling, V1's only mode), "swap", or "off" (it waits). In-process engines
   * and the engine-sim processes a static region spawns take it; engine-sims a node agent starts run the default.
   */
  preemption: "recompute" | "swap" | "off";
  /**
   * For `sim`, with preemption on: most batch (priority 1) requests an engine runs while interactive requests run or
   * wait (absent: the engine's default, 8; region/engines/sim/core.ts DEFAULT_BATCH_SLOTS_BESIDE).
   */
  batchSlotsBeside?: number;
  /**
   * For `sim`: GiB of host memory per instance for the KV tier under the prefix cache (region/engines/sim/
   * prefix-cache.ts; LMCache / vLLM CPU offloading; 0 = off); absent: 128 GiB per GPU of the instance
   * (sim-engine.ts DEFAULT_HOST_KV_GIB_PER_GPU). Every simulated engine takes it: in process, the engine-sims a static
   * region spawns, and those node agents start (StartEngine's `host_kv_cache_gib`).
   */
  hostKvCacheGiB?: number;
  /**
   * For `openai-http` and engines started from `commandTemplate`: send each request's priority in the body's
   * `priority` field (vLLM's; lower runs first), which vLLM accepts only when started with `--scheduling-policy
   * priority` (it refuses a non-zero priority otherwise), so off by default. The `x-tidegate-priority` header is
   * always sent (engine-sim reads either).
   */
  priorityField: boolean;
  /** For `openai-http`: base URLs per `region/model`, e.g. {"us-east/llama2-70b": ["http://10.0.0.5:8000"]}. */
  urls: Record<string, string[]>;
}

/** One model's simulated-engine settings (engines.models). */
export interface SimEngineModelConfig {
  maxBatch?: number;
  kvCapacityTokens?: number;
}

const PLACEHOLDERS = ["model", "port", "host", "gpu", "tp", "instance"];

/** Reads the `engines` object: http(s) URLs, a command template with known placeholders and {port}, per-model keys of configured models. */
export function parseEngines(er: ObjectReader, models: readonly ModelConfig[]): EnginesConfig {
  const urlsReader = er.object("urls");
  const urls: Record<string, string[]> = {};
  for (const key of Object.keys(urlsReader.value)) {
    urls[key] = urlsReader.array(key, (v, path) => {
      if (typeof v !== "string" || !/^https?:\/\//.test(v)) throw new ValidationError(path, "expected an http(s) URL");
      return v;
    }, undefined, { minLength: 1 });
  }
  urlsReader.done();
  const commandTemplate = er.optionalString("commandTemplate");
  if (commandTemplate !== undefined) {
    if (commandTemplate.trim() === "") er.fail("commandTemplate", "must not be empty (omit it to run engine-sim)");
    for (const m of commandTemplate.matchAll(/\{([^}]*)\}/g)) {
      if (!PLACEHOLDERS.includes(m[1]!)) er.fail("commandTemplate", `unknown placeholder {${m[1]}}; known: {model} {port} {host} {gpu} {tp} {instance}`);
    }
    if (!commandTemplate.includes("{port}")) er.fail("commandTemplate", "must contain {port} (the agent picks the engine's port)");
  }
  const engines: EnginesConfig = {
    kind: er.string("kind", "sim", { oneOf: ["sim", "openai-http"] }) as EnginesConfig["kind"],
    timeScale: er.number("timeScale", 1, { gt: 0, max: 1000 }),
    priorityField: er.boolean("priorityField", false),
    ...present("batchSlotsBeside", er.optionalNumber("batchSlotsBeside", { integer: true, min: 0 })),
    ...present("hostKvCacheGiB", er.optionalNumber("hostKvCacheGiB", { min: 0, max: 1e6 })),
    preemption: er.string("preemption", "recompute", { oneOf: ["recompute", "swap", "off"] }) as EnginesConfig["preemption"],
    urls,
    ...(commandTemplate === undefined ? {} : { commandTemplate }),
    startTimeoutMs: er.number("startTimeoutMs", 60_000, { gt: 0 }),
    stopGraceMs: er.number("stopGraceMs", 5000, { min: 0 }),
    ...present("kvCapacityTokens", er.optionalNumber("kvCapacityTokens", { integer: true, min: 2 })),
    models: {},
  };
  const emr = er.object("models");
  for (const name of Object.keys(emr.value)) {
    if (!models.some((m) => m.name === name)) emr.fail(name, `unknown model; configured: ${models.map((m) => m.name).join(", ")}`);
    const mr = emr.object(name);
    engines.models[name] = {
      ...present("maxBatch", mr.optionalNumber("maxBatch", { integer: true, min: 1, max: 65_536 })),
      ...present("kvCapacityTokens", mr.optionalNumber("kvCapacityTokens", { integer: true, min: 2 })),
    };
    mr.done();
  }
  emr.done();
  er.done();
  return engines;
}
