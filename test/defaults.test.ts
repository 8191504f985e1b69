/**
 * The defaults a user gets are the benches' winners (issue 46): every place a default strategy or routing policy is
 * written holds the value core/defaults.ts names, and the benches that judge them read their default arm from there
 * (bench:strategies checks its winner is DEFAULT_STRATEGY; bench:prefix that DEFAULT_ROUTING_POLICY wins its arms;
 * bench:forecast judges DEFAULT_FORECASTER against the naive methods).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { WEEK_FLAGS } from "../bin/replay-week-cli.js";
import { DEFAULT_CONFIG_JSON, parseConfig } from "../core/config.js";
import { DEFAULT_FORECASTER, DEFAULT_PD_MIN_PREFILL_TOKENS, DEFAULT_PD_SWITCH, DEFAULT_ROUTING_POLICY, DEFAULT_STRATEGY } from "../core/defaults.js";
import { DEFAULT_FORECASTER_NAME, isForecasterName } from "../forecasts/registry.js";
import { FORECAST_JUDGED } from "./bench/verdicts/forecast.js";
import { repoRoot } from "../core/paths.js";
import "../region/config-sections.js";
import { STRATEGY_NAMES } from "../region/strategies/strategy-registry.js";
import { PRESETS } from "../region/gateway/scoring/routing-config.js";

const read = (path: string) => readFileSync(join(repoRoot(), path), "utf8");

describe("the defaults are the benches' winners, written once", () => {
  it("names a registered strategy and routing preset", () => {
    expect(STRATEGY_NAMES).toContain(DEFAULT_STRATEGY);
    expect(Object.keys(PRESETS)).toContain(DEFAULT_ROUTING_POLICY);
    expect(isForecasterName(DEFAULT_FORECASTER)).toBe(true);
    expect(DEFAULT_FORECASTER_NAME).toBe(DEFAULT_FORECASTER);
  });

  it("every place a default forecaster is written reads DEFAULT_FORECASTER", () => {
    // dev, the planner tier, one offline plan, the week replay's ilp planner and the backtest CLI.
    expect(read("bin/dev-run.ts")).toMatch(/forecaster: DEFAULT_FORECASTER_NAME,/);
    for (const f of ["bin/commands/plan.ts", "bin/commands/planner.ts"]) expect(read(f), f).toMatch(/forecaster: \{[^}]*default: DEFAULT_FORECASTER_NAME \}/);
    expect(read("sim/week/planner.ts")).toContain(`IlpPlanner.create(name === "ilp-arima" ? "arima" : DEFAULT_FORECASTER_NAME)`);
    expect(read("sim/week/ilp-planner.ts")).toContain("create(forecaster: ForecasterName = DEFAULT_FORECASTER_NAME)");
    expect(read("bin/commands/forecast.ts")).toContain("default: `${DEFAULT_FORECASTER_NAME},");
    // No other quoted forecaster name stands in as a default where a planner is built.
    for (const f of ["bin/dev-run.ts", "bin/commands/plan.ts", "bin/commands/planner.ts", "sim/week/planner.ts", "sim/week/ilp-planner.ts", "planner/service.ts"]) expect(read(f), f).not.toMatch(/forecaster[^\n]*(default: |= |: )"blend/);
    // The Kubernetes base names no forecaster of its own (the planner runs the default); the README names it.
    expect(read("deploy/kubernetes/base/planner.yaml")).not.toContain("--forecaster");
    expect(read("README.md")).toContain(`(\`--forecaster\`, default \`${DEFAULT_FORECASTER}\``);
  });

  it("the config a user gets without a file runs them", () => {
    const c = parseConfig(DEFAULT_CONFIG_JSON);
    expect(c.controller.strategy).toBe(DEFAULT_STRATEGY);
    expect(c.routing?.preset).toBe(DEFAULT_ROUTING_POLICY);
    expect(c.routing?.pdMinPrefillTokens).toBe(DEFAULT_PD_MIN_PREFILL_TOKENS);
    expect(c.controller.pdSwitch).toBe(DEFAULT_PD_SWITCH);
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
    expect(read("region/gateway/scoring/routing-config.ts")).toContain(`r.number("pdMinPrefillTokens", DEFAULT_PD_MIN_PREFILL_TOKENS,`);
    expect(read("region/gateway/chooser.ts")).toContain("o.routing?.pdMinPrefillTokens ?? DEFAULT_PD_MIN_PREFILL_TOKENS");
    expect(read("README.md")).toContain(`\`routing.pdMinPrefillTokens\`, default ${DEFAULT_PD_MIN_PREFILL_TOKENS}`);
  });

  it("the benches judge them against their alternatives", () => {
    // bench:strategies reads its default arm from core/defaults.ts and fails unless it is the cheapest (or tied).
    expect(read("test/bench/strategies.ts")).toMatch(/costAtSloChecks\([^)]*DEFAULT_STRATEGY\)/);
    // bench:prefix checks the default routing policy wins its arms.
    expect(read("test/bench/prefix.ts")).toContain("DEFAULT_ROUTING_POLICY");
    // bench:forecast judges the default forecaster (its verdict's FORECAST_JUDGED) against the naive methods.
    expect(FORECAST_JUDGED).toBe(DEFAULT_FORECASTER);
    expect(read("test/bench/forecast.ts")).toMatch(/const JUDGED: ForecasterName = FORECAST_JUDGED;/);
    // bench:pd checks the default split threshold is its winner over both traces, and searches it.
    expect(read("test/bench/pd.ts")).toMatch(/win\.threshold === DEFAULT_PD_MIN_PREFILL_TOKENS/);
    expect(read("test/bench/pd.ts")).toMatch(new RegExp(`const THRESHOLDS = \\[[^\\]]*\\b${DEFAULT_PD_MIN_PREFILL_TOKENS}\\b`));
    // bench:burst's disaggregated setting runs the default controller.pdSwitch against its ablation and fails unless
    // switching reaches the first decode ≥ 3× sooner: the default is on.
    expect(read("test/bench/burst.ts")).toContain("decodeScaleOuts(conv, DEFAULT_PD_SWITCH)");
    expect(DEFAULT_PD_SWITCH).toBe(true);
  });
});
