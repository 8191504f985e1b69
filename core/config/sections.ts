/**
 * The config sections a tier above core owns (issue 30: core imports no tier). Core parses its own sections
 * (models, regions, router, queue, planner, controller, engines, parameters); a tier that owns a section registers
 * its parser here, and adds the section to the config's type by declaration merging:
 *
 *   declare module "../../core/config/sections.js" { interface ConfigSections { keystage?: KeystageConfig | undefined } }
 *   registerConfigSection({ key: "keystage", parse: parseKeystageConfig, check: checkPipelinedEndpoints });
 *
 * Two kinds of extension: a top-level section (`ConfigSections`, e.g. region's `keystage`) and a per-region setting
 * (`RegionSettings`, e.g. region's `loading`), read at `controller.<key>` (every region) and at `regions[i].<key>`
 * (that region's own, over the controller's). parseConfig (parse.ts) calls the registered parsers where the keys sit,
 * so their errors name the same paths and come in the same order as core's own. A key nobody registered is an
 * unknown field ("keystage: is not a known field"): a process must load the owning tier's registrations (region:
 * region/config-sections.ts) before it parses a config; region/config-sections.test.ts checks every entry point does.
 */
import type { ObjectReader } from "../validate.js";
import type { TidegateConfig } from "./parse.js";

/** Top-level sections tiers above core add to TidegateConfig (each optional: absent in the file = undefined). */
export interface ConfigSections {}

/** Per-region settings tiers above core add to both ControllerConfig (every region) and RegionConfig (one region). */
export interface RegionSettings {}

/** A top-level section a tier owns. */
export interface ConfigSection<K extends keyof ConfigSections> {
  readonly key: K;
  /** Reads the section at `path` (= `key`); `raw` undefined = absent. Throws a ValidationError naming the exact path. */
  parse(raw: unknown, path: string): ConfigSections[K] | undefined;
  /** Rules between this section and the rest, run once every section is parsed (the section may be absent). */
  check?(config: TidegateConfig): void;
}

/** A per-region setting a tier owns, read at `controller.<key>` and `regions[i].<key>`. */
export interface RegionSetting<K extends keyof RegionSettings> {
  readonly key: K;
  /** Reads the value at `path`; `raw` undefined = absent. Throws a ValidationError naming the exact path. */
  parse(raw: unknown, path: string): RegionSettings[K] | undefined;
}

interface AnySection {
  readonly key: string;
  parse(raw: unknown, path: string): unknown;
  check?(config: TidegateConfig): void;
}

const sections: AnySection[] = [];
const settings: AnySection[] = [];

function add(list: AnySection[], what: string, entry: AnySection): void {
  const old = list.find((s) => s.key === entry.key);
  if (old === entry) return;
  if (old !== undefined) throw new Error(`config ${what} ${JSON.stringify(entry.key)} is registered twice`);
  list.push(entry);
}

/** Registers a top-level section (once per key; registering the same object again is a no-op). Parsed in registration order. */
export function registerConfigSection<K extends keyof ConfigSections>(section: ConfigSection<K>): void {
  add(sections, "section", section as unknown as AnySection);
}

/** Registers a per-region setting (once per key; registering the same object again is a no-op). */
export function registerRegionSetting<K extends keyof RegionSettings>(setting: RegionSetting<K>): void {
  add(settings, "region setting", setting as unknown as AnySection);
}

/** The registered top-level sections' keys, in registration order. */
export function registeredSections(): string[] {
  return sections.map((s) => s.key);
}

/** The registered per-region settings' keys, in registration order. */
export function registeredRegionSettings(): string[] {
  return settings.map((s) => s.key);
}

/** Reads every registered per-region setting from `r` (the `controller` object or one `regions[i]`); absent ones are left out. */
export function readRegionSettings(r: ObjectReader): Partial<RegionSettings> {
  const out: Record<string, unknown> = {};
  for (const s of settings) {
    const v = s.parse(r.raw(s.key), `${r.path}.${s.key}`);
    if (v !== undefined) out[s.key] = v;
  }
  return out as Partial<RegionSettings>;
}

/** Reads every registered top-level section from the root reader into `config`, then runs each section's check. */
export function readConfigSections(root: ObjectReader, config: TidegateConfig): void {
  for (const s of sections) {
    const v = s.parse(root.raw(s.key), s.key);
    if (v !== undefined) (config as unknown as Record<string, unknown>)[s.key] = v;
  }
  for (const s of sections) s.check?.(config);
}
