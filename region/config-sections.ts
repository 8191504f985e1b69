/**
 * Region's config sections, registered with core's config (core/config/sections.ts) by importing this module:
 * `keystage` (keystage/keystage-config.ts), `routing` (gateway/scoring/routing-config.ts) and the per-region `loading`
 * key (liveload/liveload-config.ts), each of
 * which registers itself when it loads, and the check of `controller.strategyParams` against the strategy's schema
 * (strategies/strategy-config.ts). Every process that parses a config loads this first — bin/tidegate.ts, the
 * commands and replay entry points, sim's fleet builders (region/config-sections.test.ts checks that each caller of
 * parseConfig, validateConfig and loadConfig reaches this module); without it a config with either key fails at
 * start-up as an unknown field.
 */
import "./keystage/keystage-config.js";
import "./liveload/liveload-config.js";
import "./strategies/strategy-config.js";
import "./gateway/scoring/routing-config.js";
