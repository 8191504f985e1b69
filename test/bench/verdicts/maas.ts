/**
 * bench:maas's verdict (test/bench/maas.ts; issue 33). Each arm is judged on every request of the workload: a failed
 * request is +Infinity TTFT (sim/replay/loading.ts latencyFigures), and a check on an arm that failed any request
 * does not pass — the judged arm or its baseline (issue 45: a ratio against a baseline that failed is not a number);
 * the check names the arm and how many it failed.
 *
 * The ssd arm (ServerlessLLM) runs once per host-memory size of the sweep (models one host's memory holds), so its
 * host-cache miss rate comes from the workload and the memory; the other arms do not depend on it (allcache: every
 * host holds every model; the network arms: the parameter pool's one copy per model). The judged setting is the
 * largest host memory at which ssd misses at least `ssdMissRateCode` of its scale-outs on the code trace (BlitzScale's
 * regime: ServerlessLLM misses 20–46%); both traces' ssd ratios are read there.
 */
import { atLeast, atMost, failuresNote, ratio, type Check } from "./common.js";

/** What the checks read of one arm on one trace. */
export interface MaasRow {
  requests: number;
  failed: number;
  meanTtftMs: number;
  p99TtftMs: number;
  /** p90 TTFT: printed, and lambdascale's against ssd's reported in the JSON line (lambdaP90VsSsd), not judged here. */
  p90TtftMs?: number;
  /** Host-cache miss rate the arm's scale-outs saw (1 − hits / instances loaded). */
  missRate: number;
  /** p99 TTFT of the requests that arrived at a model with no serving instance, and p99 of the cold starts' loads. */
  coldTtftP99Ms: number;
  coldLoadP99Ms: number;
}

/** One trace's runs: the host-independent arms, and ssd per host-memory size (models per host). */
export interface MaasTraceRuns {
  arms: Readonly<Record<string, MaasRow>>;
  ssd: Readonly<Record<string, MaasRow>>;
}

/**
 * Targets (issue 33): with ssd's miss rate ≥ 0.30 on the code trace, blitzscale mean TTFT ≤ 0.5 × ssd (code) and
 * ≤ 0.75 × ssd (conversation); blitzscale p99 TTFT ≤ 1.1 × allcache on each trace (at every miss rate: neither arm
 * depends on host memory); blitzscale's cold-start TTFT p99 ≤ its cold starts' load p99 + 1 s.
 */
export const MAAS_TARGET = { ssdMissRateCode: 0.3, blitzVsSsdMeanCode: 0.5, blitzVsSsdMeanConv: 0.75, blitzVsAllcacheP99: 1.1, coldTtftOverLoadMs: 1000, failedRequests: 0 };

/** The judged host-memory size: the largest at which ssd's code-trace miss rate reaches the target; undefined if none. */
export function judgedHostSize(code: MaasTraceRuns | undefined): string | undefined {
  const sizes = Object.keys(code?.ssd ?? {}).sort((a, b) => Number(b) - Number(a));
  return sizes.find((s) => atLeast(code!.ssd[s]!.missRate, MAAS_TARGET.ssdMissRateCode));
}

/** results[trace] → the checks. */
export function maasChecks(results: Readonly<Record<string, MaasTraceRuns>>): Check[] {
  const checks: Check[] = [];
  const size = judgedHostSize(results["azure-code"]);
  const misses = Object.values(results["azure-code"]?.ssd ?? {}).map((r) => r.missRate).filter(Number.isFinite);
  const bestMiss = misses.length === 0 ? Number.NaN : Math.max(...misses);
  checks.push({ check: `azure-code: ssd host-cache miss rate at the judged host memory (${size === undefined ? "none of the sweep reached it; the highest is shown" : `${size} models per host`})`, value: size === undefined ? bestMiss : results["azure-code"]!.ssd[size]!.missRate, limit: MAAS_TARGET.ssdMissRateCode, ok: size !== undefined });
  const tally = (arm: string, r: MaasRow) => ({ arm, failed: r.failed, requests: r.requests });
  const compare = (label: string, j: MaasRow | undefined, base: { arm: string; row: MaasRow | undefined }, figure: "meanTtftMs" | "p99TtftMs", limit: number) => {
    const b = base.row;
    if (j === undefined || b === undefined) return checks.push({ check: `${label} (not run)`, value: Number.NaN, limit, ok: false });
    const value = ratio(j[figure], b[figure]);
    const failed = failuresNote([tally("blitzscale", j), tally(base.arm, b)]);
    return checks.push({ check: `${label}${failed}`, value, limit, ok: failed === "" && atMost(value, limit) });
  };
  for (const [trace, g] of Object.entries(results)) {
    const code = trace === "azure-code";
    const b = g.arms.blitzscale;
    compare(`${trace}: blitzscale mean TTFT / ssd at ${size ?? "?"} models per host`, b, { arm: `ssd (${size ?? "?"}/host)`, row: size === undefined ? undefined : g.ssd[size] }, "meanTtftMs", code ? MAAS_TARGET.blitzVsSsdMeanCode : MAAS_TARGET.blitzVsSsdMeanConv);
    compare(`${trace}: blitzscale p99 TTFT / allcache`, b, { arm: "allcache", row: g.arms.allcache }, "p99TtftMs", MAAS_TARGET.blitzVsAllcacheP99);
    const over = b === undefined ? Number.NaN : b.coldTtftP99Ms - b.coldLoadP99Ms;
    const failed = b === undefined ? "" : failuresNote([tally("blitzscale", b)]);
    checks.push({ check: `${trace}: blitzscale cold-start TTFT p99 − cold-start load p99 (ms)${failed}`, value: over, limit: MAAS_TARGET.coldTtftOverLoadMs, ok: failed === "" && atMost(over, MAAS_TARGET.coldTtftOverLoadMs) });
  }
  return checks;
}

/**
 * lambdascale's p90 TTFT over ssd's at the judged host memory, per trace: reported beside the verdict for issue 35
 * (λScale §7 against ServerlessLLM), whose λScale checks bench:burst judges (verdicts/burst.ts).
 */
export function lambdaP90VsSsd(results: Readonly<Record<string, MaasTraceRuns>>): Record<string, number> {
  const size = judgedHostSize(results["azure-code"]);
  const out: Record<string, number> = {};
  for (const [trace, g] of Object.entries(results)) {
    const ssd = size === undefined ? undefined : g.ssd[size];
    out[trace] = ratio(g.arms.lambdascale?.p90TtftMs ?? Number.NaN, ssd?.p90TtftMs ?? Number.NaN);
  }
  return out;
}
