/** The `engines` section: which engines serve (simulated or OpenAI-compatible HTTP) and how they start and stop. */
import { ValidationError, type ObjectReader } from "../validate.js";
import type { ModelConfig } from "./models-section.js";
import type { RegionConfig } from "./regions-section.js";
import { pickEngineSettings, readEngineSettings, type ConfigEngineSettings, type EngineSettings } from "../engine-settings.js";

/**
 * The `engines` section. Its engine settings (core/engine-settings.ts: `maxBatch`, `kvCapacityTokens`, `preemption`,
 * `batchSlotsBeside`, `hostKvCacheGiB`, ...; each optional, absent = the engine's default) are its own keys, read by
 * the schema, so the parsed section prints back in the file's form; `models.<m>` overrides them per model
 * (`modelEngineSettings`). Every simulated engine takes them: in process, the engine-sims a static region spawns, and
 * those node agents start (StartEngine's `settings`).
 */
export interface EnginesConfig extends ConfigEngineSettings {
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
   * Per-model engine settings over `settings`, the same fields (vLLM's max_num_seqs as `maxBatch`, the KV cache in
   * tokens as `kvCapacityTokens`, ...). The router's in-flight estimate uses the same capacity (router/selector.ts).
   */
  models: Record<string, ConfigEngineSettings>;
  /** For `sim`: multiply simulated durations (1 = real time as measured; 0.01 = 100× faster). */
  timeScale: number;
  /**
   * For `openai-http` and engines started from `commandTemplate`: send each request's priority in the body's
   * `priority` field (vLLM's; lower runs first), which vLLM accepts only when started with `--scheduling-policy
   * priority` (it refuses a non-zero priority otherwise), so off by default. The `x-tidegate-priority` header is
   * always sent (engine-sim reads either).
   */
  priorityField: boolean;
  /** For `openai-http`: base URLs per `region/model`, e.g. {"us-east/llama2-70b": ["http://10.0.0.5:8000"]}. */
  urls: Record<string, string[]>;
  /**
   * The prefill/decode role of a fixed engine (vLLM's disaggregation: "prefill" or "decode"; absent = "both"): for
   * `openai-http`, keyed by a URL of `urls`; for `sim` engines of a static region, keyed by the instance id
   * `region/model/gpu/index` (index from 0 to the endpoint's instances − 1), whose in-process KV moves over the
   * region's fabric (engines/sim/kv-fabric.ts). A model with prefill and decode instances serving is routed in two
   * steps by the region gateway (region/gateway/pd.ts).
   */
  roles: Record<string, "prefill" | "decode" | "both">;
}

/** A model's engine settings: the section's own (its keys that are schema fields) with `models.<model>` over them. */
export function modelEngineSettings(engines: EnginesConfig, model: string): EngineSettings {
  return { ...pickEngineSettings(engines), ...engines.models[model] };
}

/** `modelEngineSettings` for code that asks per request: each model's settings built once (the config does not change). */
export function engineSettingsLookup(engines: EnginesConfig): (model: string) => EngineSettings {
  const built = new Map<string, EngineSettings>();
  return (model) => {
    let s = built.get(model);
    if (s === undefined) built.set(model, (s = modelEngineSettings(engines, model)));
    return s;
  };
}

const PLACEHOLDERS = ["model", "port", "host", "gpu", "tp", "instance"];

/** Reads the `engines` object: http(s) URLs, a command template with known placeholders and {port}, per-model keys of configured models. */
export function parseEngines(er: ObjectReader, models: readonly ModelConfig[], regions: readonly RegionConfig[] = []): EnginesConfig {
  const urlsReader = er.object("urls");
  const urls: Record<string, string[]> = {};
  for (const key of Object.keys(urlsReader.value)) {
    urls[key] = urlsReader.array(key, (v, path) => {
      if (typeof v !== "string" || !/^https?:\/\//.test(v)) throw new ValidationError(path, "expected an http(s) URL");
      return v;
    }, undefined, { minLength: 1 });
  }
  urlsReader.done();
  const rolesReader = er.object("roles");
  const roles: Record<string, "prefill" | "decode" | "both"> = {};
  const known = new Set(Object.values(urls).flat());
  // A static region's simulated engines are named region/model/gpu/index (region/actuator/static.ts instanceSlots).
  for (const r of regions) for (const e of r.endpoints) for (let i = 0; i < e.instances; i++) known.add(`${r.name}/${e.model}/${e.gpu}/${i}`);
  for (const key of Object.keys(rolesReader.value)) {
    if (!known.has(key)) rolesReader.fail(key, "is neither one of engines.urls' URLs nor a configured instance id (region/model/gpu/index)");
    roles[key] = rolesReader.string(key, undefined, { oneOf: ["prefill", "decode", "both"] }) as "prefill" | "decode" | "both";
  }
  rolesReader.done();
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
    ...readEngineSettings(er, true),
    urls,
    roles,
    ...(commandTemplate === undefined ? {} : { commandTemplate }),
    startTimeoutMs: er.number("startTimeoutMs", 60_000, { gt: 0 }),
    stopGraceMs: er.number("stopGraceMs", 5000, { min: 0 }),
    models: {},
  };
  const emr = er.object("models");
  for (const name of Object.keys(emr.value)) {
    if (!models.some((m) => m.name === name)) emr.fail(name, `unknown model; configured: ${models.map((m) => m.name).join(", ")}`);
    const mr = emr.object(name);
    engines.models[name] = readEngineSettings(mr, true);
    mr.done();
  }
  emr.done();
  er.done();
  return engines;
}
