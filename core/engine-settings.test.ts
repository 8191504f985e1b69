import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG_JSON, modelEngineSettings, parseConfig } from "./config.js";
import { ENGINE_SETTINGS_SCHEMA, ENGINE_SETTING_KEYS, checkEngineSettings, pickEngineSettings, checkSetting, engineSettingsJson, parseEngineSettingsJson, refuseEngineSettings, settingsArgs, type EngineSettings } from "./engine-settings.js";

/** Every field at its schema example. */
const examples = Object.fromEntries(ENGINE_SETTING_KEYS.map((k) => [k, ENGINE_SETTINGS_SCHEMA[k].example])) as EngineSettings;

/** The embedded config with `engines` replaced. */
function withEngines(engines: unknown): unknown {
  return { ...(structuredClone(DEFAULT_CONFIG_JSON) as Record<string, unknown>), engines };
}

describe("the engine-settings schema", () => {
  it("accepts every field's example and carries it through JSON and --settings unchanged", () => {
    expect(checkEngineSettings(examples, "settings")).toEqual(examples);
    expect(parseEngineSettingsJson(engineSettingsJson(examples), "settings")).toEqual(examples);
    expect(settingsArgs(examples)).toEqual(["--settings", JSON.stringify(examples)]);
    // Nothing set: no JSON, no flag; "" reads back as nothing.
    expect([engineSettingsJson({}), engineSettingsJson(undefined), settingsArgs({})]).toEqual(["", "", []]);
    expect(parseEngineSettingsJson("", "settings")).toEqual({});
  });

  it("refuses a value out of range, of the wrong kind, an unknown field and broken JSON, naming the field", () => {
    expect(() => checkEngineSettings({ maxBatch: 0 }, "settings")).toThrow("settings.maxBatch: must be ≥ 1");
    expect(() => checkEngineSettings({ maxBatch: 2.5 }, "settings")).toThrow("settings.maxBatch");
    expect(() => checkEngineSettings({ kvCapacityTokens: 1 }, "settings")).toThrow("settings.kvCapacityTokens");
    expect(() => checkEngineSettings({ preemption: "kill" }, "settings")).toThrow("settings.preemption: must be one of recompute, swap, off");
    expect(() => checkEngineSettings({ hostKvCacheGiB: -1 }, "settings")).toThrow("settings.hostKvCacheGiB");
    expect(() => checkEngineSettings({ hostKvCacheGiB: "2" }, "settings")).toThrow("settings.hostKvCacheGiB");
    expect(() => checkEngineSettings({ maxBatchh: 3 }, "settings")).toThrow("settings.maxBatchh");
    expect(() => parseEngineSettingsJson("{maxBatch", "--settings")).toThrow(/^--settings: expected JSON/);
    // Zero is a setting where the schema allows it (prefix cache off, host tier off, no batch beside).
    expect(checkEngineSettings({ prefixBlockTokens: 0, hostKvCacheGiB: 0, batchSlotsBeside: 0 }, "s")).toEqual({ prefixBlockTokens: 0, hostKvCacheGiB: 0, batchSlotsBeside: 0 });
  });

  it("checks a single flag's value by the same rules, naming the flag", () => {
    expect(checkSetting("maxBatch", 4, "--max-batch")).toBe(4);
    expect(() => checkSetting("maxBatch", 0, "--max-batch")).toThrow("--max-batch: must be ≥ 1");
    expect(() => checkSetting("preemption", "kill", "--preemption")).toThrow("--preemption: must be one of recompute, swap, off");
  });

  it("refuses settings, naming them, where an engine takes none", () => {
    expect(() => refuseEngineSettings({ maxBatch: 3, hostKvCacheGiB: 1 }, "do not apply to a pipeline")).toThrow("engine settings (maxBatch, hostKvCacheGiB) do not apply to a pipeline");
    expect(() => refuseEngineSettings({}, "x")).not.toThrow();
    expect(() => refuseEngineSettings(undefined, "x")).not.toThrow();
  });

  it("reads every configurable field under `engines` and `engines.models.<m>`, the model's over the section's", () => {
    const configurable = ENGINE_SETTING_KEYS.filter((k) => ENGINE_SETTINGS_SCHEMA[k].config);
    const regionWide = Object.fromEntries(configurable.map((k) => [k, ENGINE_SETTINGS_SCHEMA[k].example]));
    const cfg = parseConfig(withEngines({ ...regionWide, models: { "llama3.2-3b": { maxBatch: 9 } } }));
    expect(pickEngineSettings(cfg.engines)).toEqual(regionWide);
    // The parsed section prints back in the file's form (--print-config) and reads back the same.
    expect(parseConfig(JSON.parse(JSON.stringify(cfg))).engines).toEqual(cfg.engines);
    expect(modelEngineSettings(cfg.engines, "llama3.2-3b")).toEqual({ ...regionWide, maxBatch: 9 });
    expect(modelEngineSettings(cfg.engines, "llama3.1-8b")).toEqual(regionWide);
    // Errors name the config path; prefixBlockTokens is routing.blockTokens' and not an engines key.
    expect(() => parseConfig(withEngines({ models: { "llama3.2-3b": { preemption: "kill" } } }))).toThrow("engines.models.llama3.2-3b.preemption");
    expect(() => parseConfig(withEngines({ prefixBlockTokens: 32 }))).toThrow("engines.prefixBlockTokens");
  });
});
