/**
 * Per-region settings a tier above core owns (core/config/sections.ts explains the registry): read at
 * `controller.<key>` (every region) and at `regions[i].<key>` (that region's own, over the controller's). Kept apart
 * from sections.ts so the controller and regions parsers, which read these, import nothing that imports them.
 */
import type { ObjectReader } from "../validate.js";

/** Per-region settings tiers above core add to both ControllerConfig (every region) and RegionConfig (one region). */
export interface RegionSettings {}

/** A per-region setting a tier owns, read at `controller.<key>` and `regions[i].<key>`. */
export interface RegionSetting<K extends keyof RegionSettings> {
  readonly key: K;
  /** Reads the value at `path`; `raw` undefined = absent. Throws a ValidationError naming the exact path. */
  parse(raw: unknown, path: string): RegionSettings[K] | undefined;
}

/** One registered entry, section or setting. */
export interface Registered {
  readonly key: string;
  parse(raw: unknown, path: string): unknown;
}

/** Adds `entry` to `list` once per key (the same object again is a no-op; another with the same key is an error). */
export function addOnce<E extends Registered>(list: E[], what: string, entry: E): void {
  const old = list.find((s) => s.key === entry.key);
  if (old === entry) return;
  if (old !== undefined) throw new Error(`config ${what} ${JSON.stringify(entry.key)} is registered twice`);
  list.push(entry);
}

const settings: Registered[] = [];

/** Registers a per-region setting (once per key; registering the same object again is a no-op). */
export function registerRegionSetting<K extends keyof RegionSettings>(setting: RegionSetting<K>): void {
  addOnce(settings, "region setting", setting as unknown as Registered);
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
