/**
 * The top-level `routing` section (issue 34): its type is core's (core/config/routing-section.ts: the global router
 * reads it too); its parser is region's, registered with core's config (core/config/sections.ts) when this module
 * loads (region/config-sections.ts loads it):
 *
 *   "routing": { "policy": "prefix-aware",         // (default) or "jsq", "round-robin": a preset of the plugins below
 *                "scorers": [{ "name": "prefix", "weight": 3 }, { "name": "load", "weight": 2 }],   // overrides
 *                "filters": ["serving", "unsaturated"], "picker": "max",
 *                "blockTokens": 16,                          // tokens per KV block the prompt is hashed with
 *                "regionPrefix": true,                       // the global router prefers a region holding the prefix
 *                "pdMinPrefillTokens": 2048 }                // (default, bench:pd) a disaggregated model splits a request only from this uncached prompt
 *
 * `policy` picks the preset (plugins.ts JSQ_POLICY, PREFIX_AWARE_POLICY); `filters`, `scorers` and `picker` replace the
 * preset's. The default policy is core/defaults.ts DEFAULT_ROUTING_POLICY (`prefix-aware`, bench:prefix's winner); an
 * absent section is read as `{}`, so every configuration has a `routing`. `blockTokens` must equal the engines' block size (engine-sim's `prefixCache.blockTokens`, vLLM's
 * `--block-size`) for KV events to be used. `regionPrefix` (default: true with a prefix-aware policy) turns on the
 * global router's prefix preference among regions under the 0.70 threshold (router/prefix-regions.ts).
 */
import type { RoutingConfig, RoutingPreset } from "../../../core/config/routing-section.js";
import { registerConfigSection, type ConfigSection } from "../../../core/config/sections.js";
import { DEFAULT_PD_MIN_PREFILL_TOKENS, DEFAULT_ROUTING_POLICY } from "../../../core/defaults.js";
import { DEFAULT_BLOCK_TOKENS } from "../../../core/prefix.js";
import { ObjectReader, ValidationError } from "../../../core/validate.js";
import { FILTERS, JSQ_POLICY, PICKERS, PREFIX_AWARE_POLICY, ROUND_ROBIN_POLICY, SCORERS, type PolicySpec } from "./plugins.js";

/** The policies `routing.policy` names (core/config/routing-section.ts RoutingPreset). */
export const PRESETS: Readonly<Record<RoutingPreset, PolicySpec>> = { jsq: JSQ_POLICY, "prefix-aware": PREFIX_AWARE_POLICY, "round-robin": ROUND_ROBIN_POLICY };

export type { RoutingConfig } from "../../../core/config/routing-section.js";

/** Reads `routing` (every field optional; absent = `{}`, the defaults); unknown plugin names are rejected at their path. */
export function parseRoutingConfig(json: unknown, path = "routing"): RoutingConfig {
  const r = new ObjectReader(json ?? {}, path);
  const preset = r.string("policy", DEFAULT_ROUTING_POLICY, { oneOf: Object.keys(PRESETS) }) as RoutingConfig["preset"];
  const base = PRESETS[preset];
  const name = (reg: Readonly<Record<string, unknown>>, kind: string) => (v: unknown, p: string) => {
    if (typeof v !== "string" || !Object.hasOwn(reg, v)) throw new ValidationError(p, `unknown ${kind} ${JSON.stringify(v)}; known: ${Object.keys(reg).join(", ")}`);
    return v;
  };
  const filters = r.array("filters", name(FILTERS, "filter"), [...base.filters]);
  const scorers = r.array(
    "scorers",
    (v, p) => {
      const s = new ObjectReader(v, p);
      const out = { name: name(SCORERS, "scorer")(s.raw("name"), `${p}.name`), weight: s.number("weight", 1, { min: 0, max: 1000 }) };
      s.done();
      return out;
    },
    base.scorers.map((s) => ({ ...s })),
    { minLength: 1 },
  );
  if (!scorers.some((s) => s.weight > 0)) r.fail("scorers", "needs a scorer with a weight > 0");
  const picker = r.string("picker", base.picker, { oneOf: Object.keys(PICKERS) });
  const blockTokens = r.number("blockTokens", DEFAULT_BLOCK_TOKENS, { integer: true, min: 1, max: 4096 });
  const regionPrefix = r.boolean("regionPrefix", preset === "prefix-aware");
  const pdMinPrefillTokens = r.number("pdMinPrefillTokens", DEFAULT_PD_MIN_PREFILL_TOKENS, { integer: true, min: 0, max: 1_000_000 });
  r.done();
  return { preset, policy: { filters, scorers, picker }, blockTokens, regionPrefix, pdMinPrefillTokens };
}

export const ROUTING_SECTION: ConfigSection<"routing"> = { key: "routing", parse: (raw, path) => parseRoutingConfig(raw, path) };
registerConfigSection(ROUTING_SECTION);
