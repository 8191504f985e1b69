/**
 * The defaults a user gets are the benches' winners (issue 46): every place a default strategy or routing policy is
 * written holds the value core/defaults.ts names, and the benches that judge them read their default arm from there
 * (bench:strategies checks its winner is DEFAULT_STRATEGY; bench:prefix that DEFAULT_ROUTING_POLICY wins its arms).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { WEEK_FLAGS } from "../bin/replay-week-cli.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { DEFAULT_ROUTING_POLICY, DEFAULT_STRATEGY } from "../core/defaults.js";
import { repoRoot } from "../core/paths.js";
import "../region/config-sections.js";
import { STRATEGY_NAMES } from "../region/strategies/strategy-registry.js";
import { PRESETS } from "../region/gateway/scoring/routing-config.js";

const read = (path: string) => readFileSync(join(repoRoot(), path), "utf8");

describe("the defaults are the benches' winners, written once", () => {
  it("names a registered strategy and routing preset", () => {
    expect(STRATEGY_NAMES).toContain(DEFAULT_STRATEGY);
    expect(Object.keys(PRESETS)).toContain(DEFAULT_ROUTING_POLICY);
  });

  it("the config a user gets without a file runs them", () => {
    const c = parseConfig(DEFAULT_CONFIG_JSON);
    expect(c.controller.strategy).toBe(DEFAULT_STRATEGY);
    expect(c.routing?.preset).toBe(DEFAULT_ROUTING_POLICY);
    // A file that omits both sections gets them too.
    const partial = parseConfig({ ...(DEFAULT_CONFIG_JSON as Record<string, unknown>), controller: {}, routing: undefined });
    expect([partial.controller.strategy, partial.routing?.preset]).toEqual([DEFAULT_STRATEGY, DEFAULT_ROUTING_POLICY]);
  });

  it("the replay CLI, the Kubernetes base and the docs say the same", () => {
    expect(WEEK_FLAGS.strategy!.default).toBe(DEFAULT_STRATEGY);
    const k8s = read("deploy/kubernetes/base/config.yaml");
    expect(k8s).toContain(`"strategy": "${DEFAULT_STRATEGY}"`);
    // The base names no routing policy of its own: it runs the default.
    expect(k8s).not.toMatch(/"policy":/);
    expect(read("README.md")).toContain(`\`controller.strategy\`, default \`${DEFAULT_STRATEGY}\``);
    expect(read("README.md")).toContain(`\`routing.policy\`, default \`${DEFAULT_ROUTING_POLICY}\``);
    expect(read("region/strategies/README.md")).toContain(`\`${DEFAULT_STRATEGY}\` (default)`);
    expect(read("region/gateway/scoring/routing-config.ts")).toContain("DEFAULT_ROUTING_POLICY");
  });

  it("the benches judge them against their alternatives", () => {
    // bench:strategies reads its default arm from core/defaults.ts and fails unless it is the cheapest (or tied).
    expect(read("test/bench/strategies.ts")).toMatch(/costAtSloChecks\([^)]*DEFAULT_STRATEGY\)/);
    // bench:prefix checks the default routing policy wins its arms.
    expect(read("test/bench/prefix.ts")).toContain("DEFAULT_ROUTING_POLICY");
  });
});
