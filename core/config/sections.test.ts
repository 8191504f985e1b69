// The registry of tier-owned config sections, with a toy section and setting (no tier imported: this file's module
// graph has only what it registers).
import { describe, expect, it } from "vitest";
import { ValidationError } from "../validate.js";
import { DEFAULT_CONFIG_JSON } from "./defaults.js";
import { mergeOverDefault, validateConfig } from "./load.js";
import { parseConfig } from "./parse.js";
import { registerRegionSetting, registeredRegionSettings, type RegionSetting } from "./region-settings.js";
import { registerConfigSection, registeredSections, type ConfigSection } from "./sections.js";

// Toy extensions: a top-level `color` section and a per-region `tier` setting (typed loosely: they are not merged into
// ConfigSections / RegionSettings).
const checked: string[] = [];
const color = {
  key: "color",
  parse: (raw: unknown, path: string) => {
    if (raw === undefined) return undefined;
    if (raw !== "red" && raw !== "blue") throw new ValidationError(path, `must be red or blue, got ${JSON.stringify(raw)}`);
    return raw;
  },
  check: (config: Record<string, unknown>) => {
    checked.push(String(config.color));
    if (config.color === "blue" && (config.router as { port: number }).port === 1) throw new ValidationError("color", "blue needs another port");
  },
} as unknown as ConfigSection<never>;
const tier = {
  key: "tier",
  parse: (raw: unknown, path: string) => {
    if (raw === undefined) return undefined;
    if (typeof raw !== "number") throw new ValidationError(path, "expected a number");
    return raw;
  },
} as unknown as RegionSetting<never>;

const regions = (): Record<string, unknown>[] => structuredClone((DEFAULT_CONFIG_JSON as { regions: Record<string, unknown>[] }).regions);

describe("config sections a tier registers", () => {
  it("an unregistered key is an unknown field", () => {
    expect(registeredSections()).toEqual([]);
    expect(() => parseConfig(mergeOverDefault({ color: "red" }))).toThrow("color: is not a known field");
    expect(() => parseConfig(mergeOverDefault({ controller: { tier: 1 } }))).toThrow("controller.tier: is not a known field");
  });

  it("a registered section is read at the top, after core's, then checked against the rest", () => {
    registerConfigSection(color);
    registerConfigSection(color); // the same definition again: no-op
    expect(registeredSections()).toEqual(["color"]);
    expect(() => registerConfigSection({ ...color })).toThrow('config section "color" is registered twice');
    checked.length = 0;
    expect((parseConfig(mergeOverDefault({ color: "red" })) as unknown as { color?: string }).color).toBe("red");
    expect("color" in parseConfig(mergeOverDefault({}))).toBe(false);
    expect(checked).toEqual(["red", "undefined"]);
    expect(() => parseConfig(mergeOverDefault({ color: "green" }))).toThrow('color: must be red or blue, got "green"');
    expect(() => parseConfig(mergeOverDefault({ color: "blue", router: { port: 1 } }))).toThrow("color: blue needs another port");
    // Core's sections come first: with a bad router and a bad color, every error, router's first.
    expect(validateConfig(mergeOverDefault({ color: "green", router: { port: -1 } })).errors.map((e) => e.path)).toEqual(["router.port", "color"]);
  });

  it("a registered region setting is read in controller and in each region, where core's keys sit", () => {
    registerRegionSetting(tier);
    expect(registeredRegionSettings()).toEqual(["tier"]);
    const rs = regions();
    rs[2]!.tier = 3;
    const c = parseConfig(mergeOverDefault({ regions: rs, controller: { tier: 1 } })) as unknown as { controller: { tier?: number }; regions: { tier?: number }[] };
    expect(c.controller.tier).toBe(1);
    expect(c.regions.map((r) => r.tier)).toEqual([undefined, undefined, 3]);
    expect(Object.keys(c.regions[2]!).at(-1)).toBe("tier");
    rs[0]!.tier = "high";
    expect(() => parseConfig(mergeOverDefault({ regions: rs }))).toThrow("regions[0].tier: expected a number");
    // Read after maxEjectedPercent and before gpus, as core's own keys: the first error is the setting's.
    rs[0]!.gpus = "none";
    expect(() => parseConfig(mergeOverDefault({ regions: rs }))).toThrow("regions[0].tier: expected a number");
    expect(() => parseConfig(mergeOverDefault({ controller: { tier: "x", retryInitialMs: 10, retryMaxMs: 5 } }))).toThrow("controller.tier: expected a number");
  });
});
