/**
 * bench:burst's verdict (test/bench/burst.ts). A configuration is judged on every request of the trace: its TTFT
 * figures count a failed request as +Infinity (sim/replay/loading.ts latencyFigures), and a check on a judged
 * configuration that failed any request does not pass, whatever its ratio (a source that drops requests would
 * otherwise get a lower TTFT from the ones it kept), and neither does a check against a baseline that failed any
 * (issue 45: its +Infinity figure made the ratio 0, a pass); the check names the arm and how many it failed.
 */
import { atMost, failuresNote, ratio, type Check } from "./common.js";

/** The figures of one (model, trace, configuration) run the checks read. */
export interface BurstRow {
  requests: number;
  failed: number;
  meanTtftMs: number;
  p99TtftMs: number;
  p90TtftMs: number;
  /** GPU time until serving: instance-seconds from each load's start until the instance serves, summed (issue 35). */
  untilServingS: number;
}

/**
 * Targets (issue 12), per model and trace; `failedRequests`: what a judged configuration or its baseline may fail (none). Issue 35
 * adds λScale's own comparison (λScale §7.3: GPU time 17.8% below FaaSNet's, p90 latency 2.4–5× better): lambdascale's
 * GPU time until serving ≤ 0.85 × the FaaSNet binary tree's, and its p90 TTFT ≤ 0.5 × ssd's, on every model and trace.
 */
export const BURST_TARGET = { blitzVsSsdMean: 0.7, blitzVsAllcacheP99: 1.1, zigzagVsBestEffort: 1, lambdaVsNetworkP99Code: 0.5, failedRequests: 0, lambdaVsTreeGpu: 0.85, lambdaVsSsdP90: 0.5 };

/** results[model][trace][configuration] → every check of issue 12 (the code trace adds λScale's) and issue 35's λScale checks. */
export function burstChecks(results: Readonly<Record<string, Readonly<Record<string, Readonly<Record<string, BurstRow>>>>>>): Check[] {
  const checks: Check[] = [];
  for (const [model, traces] of Object.entries(results)) {
    for (const [trace, g] of Object.entries(traces)) {
      const add = (what: string, judged: string, baseline: string, figure: "meanTtftMs" | "p99TtftMs" | "p90TtftMs" | "untilServingS", limit: number) => {
        const j = g[judged];
        const b = g[baseline];
        if (j === undefined || b === undefined) {
          checks.push({ check: `${model} ${trace}: ${what} (not run)`, value: Number.NaN, limit, ok: false });
          return;
        }
        const value = ratio(j[figure], b[figure]);
        const failed = failuresNote([{ arm: judged, failed: j.failed, requests: j.requests }, { arm: baseline, failed: b.failed, requests: b.requests }]);
        checks.push({ check: `${model} ${trace}: ${what}${failed}`, value, limit, ok: failed === "" && atMost(value, limit) });
      };
      add("blitzscale mean TTFT / ssd", "blitzscale", "ssd", "meanTtftMs", BURST_TARGET.blitzVsSsdMean);
      add("blitzscale p99 TTFT / allcache", "blitzscale", "allcache", "p99TtftMs", BURST_TARGET.blitzVsAllcacheP99);
      add("zigzag mean TTFT / best-effort", "blitzscale", "blitzscale-best-effort", "meanTtftMs", BURST_TARGET.zigzagVsBestEffort);
      add("zigzag p99 TTFT / best-effort", "blitzscale", "blitzscale-best-effort", "p99TtftMs", BURST_TARGET.zigzagVsBestEffort);
      if (trace === "azure-code") add("lambdascale p99 TTFT / network", "lambdascale", "network", "p99TtftMs", BURST_TARGET.lambdaVsNetworkP99Code);
      add("lambdascale GPU time until serving / faasnet-tree", "lambdascale", "faasnet-tree", "untilServingS", BURST_TARGET.lambdaVsTreeGpu);
      add("lambdascale p90 TTFT / ssd", "lambdascale", "ssd", "p90TtftMs", BURST_TARGET.lambdaVsSsdP90);
    }
  }
  return checks;
}

/** The disaggregated setting's targets (issue 48 must-show 2; burst-pd.ts). */
export const PD_BURST_TARGET = { switchVsLoad: 1 / 3, kvP99WithMulticast: 1.2 };

/**
 * The disaggregated setting's checks: the median switched decode scale-out's time to its first decode (the run with
 * controller.pdSwitch) over the median loaded one's (the run without), ≤ 1/3 — NaN (no switch, or no load) never
 * passes, nor a run that failed a request — and the p99 KV transfer time during a multicast over its p99 without one
 * under the interference-avoiding plan (≤ 1.2).
 */
export function pdBurstChecks(withSwitch: { switchMedianMs: number; failed: number; requests: number }, withLoad: { loadMedianMs: number; failed: number; requests: number }, kvAvoidingRatio: number): Check[] {
  const r = ratio(withSwitch.switchMedianMs, withLoad.loadMedianMs);
  const failed = failuresNote([{ arm: "pdSwitch", failed: withSwitch.failed, requests: withSwitch.requests }, { arm: "no pdSwitch", failed: withLoad.failed, requests: withLoad.requests }]);
  return [
    { check: `disaggregated: decode scale-out by switching / by loading, median time to the first decode${failed}`, value: r, limit: PD_BURST_TARGET.switchVsLoad, ok: failed === "" && atMost(r, PD_BURST_TARGET.switchVsLoad) },
    { check: "disaggregated: p99 KV transfer during a multicast / without, interference-avoiding plan", value: kvAvoidingRatio, limit: PD_BURST_TARGET.kvP99WithMulticast, ok: atMost(kvAvoidingRatio, PD_BURST_TARGET.kvP99WithMulticast) },
  ];
}
