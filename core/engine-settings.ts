/**
 * The one engine-settings schema (issue 47): every setting a simulated engine takes beyond its model, GPU and time
 * scale, defined once. Everything on the path from config to a running engine derives from this table:
 *
 * - the config reads each field region-wide under `engines` and per model under `engines.models.<m>`
 *   (core/config/engines-section.ts `readEngineSettings`);
 * - the region resolves a model's settings (region/runtime/build-sim-engine.ts `engineSettingsOf`);
 * - StartEngine carries them as one JSON field (nodes/proto/agent.proto `settings`), a node agent checks them
 *   (`checkEngineSettings`) and hands them to engine-sim as one flag, `--settings <json>`
 *   (nodes/agent/engine-supervisor.ts), as a static region's spawned engines get them (build-sim-engine.ts
 *   `engineSimFlags`);
 * - engine-sim takes `--settings` and one flag per field (`flag` below) and answers them on `/health`;
 * - in-process engines get the same object (build-sim-engine.ts `newSimEngine`).
 *
 * Adding a setting: a field in `EngineSettings`, its entry in `ENGINE_SETTINGS_SCHEMA` (the type makes it required),
 * and the engine code that uses it. nodes/agent/engine-supervisor.test.ts sends every field's `example` to an
 * engine-sim that a `tidegate agent` process started over gRPC and reads them back from its /health, so a field that
 * any step drops fails it; it also plants a field in a copy of the build's schema alone and reads it back the same way.
 */
import { TidegateError, type ErrorCode } from "./errors.js";
import { ObjectReader, ValidationError, checkNumber } from "./validate.js";

/** A simulated engine's settings; unset = the engine's default (0 is a setting: no prefix cache, no host tier). */
export interface EngineSettings {
  /** Most requests in the running batch (vLLM max_num_seqs); default 256. */
  maxBatch?: number;
  /** KV cache in tokens; default the profile's (GPU memory × 0.9 − weights). */
  kvCapacityTokens?: number;
  /** What a priority 0 request short of KV or a batch slot does while batch work runs; default recompute. */
  preemption?: "recompute" | "swap" | "off";
  /** Most priority 1 requests that run while priority 0 requests run or wait; default 8. */
  batchSlotsBeside?: number;
  /** Tokens per KV block of the automatic prefix cache (vLLM --block-size); 0 = off; default 16. */
  prefixBlockTokens?: number;
  /** GiB of host memory for the KV tier under the prefix cache; 0 = off; default 128 per GPU. */
  hostKvCacheGiB?: number;
  /**
   * Prefill/decode disaggregation (engines/sim/kv-transfer.ts, vLLM's kv_transfer_params contract): "prefill"
   * serves only prefills for a remote decode, "decode" decodes from a remote prefill or serves a request whole (a short
   * prompt the router did not split: routing.pdMinPrefillTokens), "both" (default) either, and plain requests.
   */
  role?: "prefill" | "decode" | "both";
  /**
   * Chunked prefill, as vLLM V1 schedules it (vLLM max_num_batched_tokens): the most tokens one engine step computes,
   * every running request's decode token (1 each) and chunks of prompts together; ≥ maxBatch. Unset (default): whole
   * prompts prefill in steps of their own that stall every decode (engines/sim/core.ts).
   */
  maxNumBatchedTokens?: number;
}

/** One field of the schema: its value rules, its engine-sim flag, its help line and a valid non-default example. */
export type SettingSpec =
  | { kind: "integer" | "number"; min: number; max?: number; flag: string; help: string; example: number; config: boolean }
  | { kind: "enum"; oneOf: readonly string[]; flag: string; help: string; example: string; config: boolean };

/**
 * Every field of EngineSettings. `config: false` = not read from the `engines` section (prefixBlockTokens comes from
 * `routing.blockTokens`, so engines hash prompts with the router's block size).
 */
export const ENGINE_SETTINGS_SCHEMA: { readonly [K in keyof Required<EngineSettings>]: SettingSpec } = {
  maxBatch: { kind: "integer", min: 1, max: 65_536, flag: "max-batch", help: "most requests in the running batch (vLLM max_num_seqs; default 256)", example: 7, config: true },
  kvCapacityTokens: { kind: "integer", min: 2, flag: "kv-capacity-tokens", help: "KV capacity in tokens (default: GPU memory x 0.9 - weights)", example: 12_345, config: true },
  preemption: { kind: "enum", oneOf: ["recompute", "swap", "off"], flag: "preemption", help: "a priority 0 request short of KV or a batch slot preempts running priority 1 requests: recompute (default), swap or off", example: "swap", config: true },
  batchSlotsBeside: { kind: "integer", min: 0, flag: "batch-slots-beside", help: "most priority 1 requests that run while priority 0 requests run or wait (default 8)", example: 3, config: true },
  prefixBlockTokens: { kind: "integer", min: 0, flag: "prefix-block-tokens", help: "tokens per KV block of the automatic prefix cache (default 16, vLLM's --block-size; 0 turns prefix caching off)", example: 32, config: false },
  hostKvCacheGiB: { kind: "number", min: 0, max: 1e6, flag: "host-kv-cache-gib", help: "GiB of host memory for the KV tier under the prefix cache (default 128 per GPU; 0 turns it off)", example: 2.5, config: true },
  // Not in the engines section: a role is an instance's, given when it starts (StartEngine, engine-sim --role).
  role: { kind: "enum", oneOf: ["prefill", "decode", "both"], flag: "role", help: "prefill/decode disaggregation with vLLM's kv_transfer_params: prefill (only prefills for a remote decode), decode (decodes from a remote prefill, or serves a short request whole) or both (default: either, and plain requests)", example: "decode", config: false },
  maxNumBatchedTokens: { kind: "integer", min: 1, flag: "max-num-batched-tokens", help: "chunked prefill (vLLM max_num_batched_tokens): most tokens one step computes, running decodes (1 each) and prompt chunks together; at least max-batch (default: unset, whole-prompt prefills that stall decodes)", example: 2048, config: true },
};

/** The schema's field names. */
export const ENGINE_SETTING_KEYS = Object.keys(ENGINE_SETTINGS_SCHEMA) as (keyof EngineSettings)[];

/** The settings a config's `engines` section (and each `engines.models.<m>`) may set: the schema's `config: true` fields. */
export type ConfigEngineSettings = Omit<EngineSettings, "prefixBlockTokens" | "role">;

/** The schema's fields set on `o` (e.g. the `engines` section, which holds them beside its own keys). */
export function pickEngineSettings(o: object): EngineSettings {
  const out: Record<string, unknown> = {};
  for (const k of ENGINE_SETTING_KEYS) if ((o as Record<string, unknown>)[k] !== undefined) out[k] = (o as Record<string, unknown>)[k];
  return out as EngineSettings;
}

/** Reads one field from `r` by its spec (undefined when absent); errors name `r.path`.key. */
function readField(r: ObjectReader, key: keyof EngineSettings): number | string | undefined {
  const s = ENGINE_SETTINGS_SCHEMA[key];
  if (!r.has(key)) return undefined;
  if (s.kind === "enum") return r.string(key, undefined, { oneOf: s.oneOf });
  return r.number(key, undefined, { min: s.min, ...(s.max === undefined ? {} : { max: s.max }), integer: s.kind === "integer" });
}

/**
 * Reads the schema's fields from `r` (every field, or only those configured under `engines` with `configOnly`),
 * leaving other keys to the caller; absent fields stay absent.
 */
export function readEngineSettings(r: ObjectReader, configOnly = false): EngineSettings {
  const out: Record<string, number | string> = {};
  for (const key of ENGINE_SETTING_KEYS) {
    if (configOnly && !ENGINE_SETTINGS_SCHEMA[key].config) continue;
    const v = readField(r, key);
    if (v !== undefined) out[key] = v;
  }
  return out as EngineSettings;
}

/** Checks a whole settings object (unknown keys refused), e.g. one that came over the wire; errors name `path`.key. */
export function checkEngineSettings(value: unknown, path: string, code: ErrorCode = "invalid_request"): EngineSettings {
  const r = new ObjectReader(value, path, code);
  const out = readEngineSettings(r);
  r.done();
  return out;
}

/** The JSON that StartEngine and `--settings` carry ("" for no settings). */
export function engineSettingsJson(s: EngineSettings | undefined): string {
  return s === undefined || Object.keys(s).length === 0 ? "" : JSON.stringify(s);
}

/** Parses and checks `engineSettingsJson`'s output ("" = none); errors are `code` and name `path`. */
export function parseEngineSettingsJson(text: string, path: string, code: ErrorCode = "invalid_request"): EngineSettings {
  if (text === "") return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new ValidationError(path, `expected JSON of engine settings: ${(err as Error).message}`, code);
  }
  return checkEngineSettings(v, path, code);
}

/** The set fields of `s`, for messages ("maxBatch, preemption"). */
export function settingNames(s: EngineSettings): string[] {
  return ENGINE_SETTING_KEYS.filter((k) => s[k] !== undefined);
}

/** Refuses settings for an engine that takes none (a real engine, a pipeline, a stage process), naming them. */
export function refuseEngineSettings(s: EngineSettings | undefined, why: string, param = "settings"): void {
  const names = s === undefined ? [] : settingNames(s);
  if (names.length > 0) throw new TidegateError("invalid_request", `engine settings (${names.join(", ")}) ${why}`, { param });
}

/** engine-sim's `--settings <json>` for `s` (what a region passes to the engines it spawns or a node agent starts), nothing when it sets nothing. */
export function settingsArgs(s: EngineSettings | undefined): string[] {
  const json = engineSettingsJson(s);
  return json === "" ? [] : ["--settings", json];
}

/** Checks one field's value (a flag's), errors naming `label` (e.g. "--max-batch"). */
export function checkSetting(key: keyof EngineSettings, value: unknown, label: string, code: ErrorCode = "invalid_request"): number | string {
  const s = ENGINE_SETTINGS_SCHEMA[key];
  if (s.kind === "enum") {
    if (typeof value !== "string" || !s.oneOf.includes(value)) throw new ValidationError(label, `must be one of ${s.oneOf.join(", ")}, got ${JSON.stringify(value)}`, code);
    return value;
  }
  return checkNumber(value, label, { min: s.min, ...(s.max === undefined ? {} : { max: s.max }), integer: s.kind === "integer" }, code);
}
