/**
 * The type of the top-level `routing` section, declared in core because tiers other than region read it (the global
 * router's region prefix preference, router/router-core.ts). Its parser, which checks plugin names against the
 * region gateway's registry, is region's (region/gateway/scoring/routing-config.ts) and registers itself with
 * core's config (sections.ts).
 */

/** A routing policy as plugin names: filters, weighted scorers and a picker (region/gateway/scoring/plugins.ts). */
export interface RoutingPolicySpec {
  filters: readonly string[];
  scorers: readonly { name: string; weight: number }[];
  picker: string;
}

/** The policies `routing.policy` names (the presets of region/gateway/scoring/routing-config.ts PRESETS). */
export type RoutingPreset = "jsq" | "prefix-aware" | "round-robin";

export interface RoutingConfig {
  /** The preset named and the resolved plugins. */
  preset: RoutingPreset;
  policy: RoutingPolicySpec;
  /** Tokens per KV block prompts are hashed with (the engines' block size). */
  blockTokens: number;
  /** Whether the global router prefers a region holding the prompt's prefix (router/prefix-regions.ts). */
  regionPrefix: boolean;
  /**
   * Prefill/decode disaggregation (region/gateway/pd.ts): a request of a model served disaggregated is split in two
   * (prefill instance, then decode instance) only when its uncached prompt is at least this many tokens; a shorter one
   * goes whole to one instance that prefills and decodes (a decode or `both` instance), as llm-d's decode workers
   * prefill short prompts themselves. 0 (default): every request is split, as vLLM's proxy does.
   */
  pdMinPrefillTokens: number;
}
