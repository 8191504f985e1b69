/**
 * bench:overload's verdict (issue 32, "What it must show"): pure, from the figures the bench measured. Every
 * threshold it judges is in OVERLOAD_TARGET (the bench prints it, with the SLO and the normal TTFT this run's
 * unloaded phase gave them, in its JSON `target`). A request of the overload that was neither answered 429 nor
 * served in full fails a check of its own (issue 45: 5xx and timeouts were counted and judged by nothing), and a
 * check whose baseline failed requests — the capacity arm, or the unloaded phase that sets the SLO and the TTFT bar —
 * fails and names it.
 */
import { atLeast, atMost, failuresNote, ratio, verdictOf, type Check, type Verdict } from "./common.js";

export const OVERLOAD_TARGET = {
  /** Goodput (output tokens/s of requests meeting the SLO) during the overload over the capacity measured unloaded. */
  goodputRatio: 0.9,
  /** p99 latency of a 429 (ms). */
  shedP99Ms: 20,
  /** p99 TTFT of admitted interactive requests during the overload over the unloaded p99. */
  admittedTtftP99Ratio: 2,
  /** Engines taken out of service during the run. */
  ejected: 0,
  /** The global router's RSS growth over the run. */
  rssGrowth: 0.2,
  /** Seconds after the overload ends until TTFT is back to normal. */
  recoveryS: 5,
  /** Each of the two equal-weight tenants' share of goodput during the overload. */
  tenantShareMin: 0.45,
  tenantShareMax: 0.55,
  /** Overload requests answered neither 200 nor 429 (5xx, timeouts, refused connections). */
  other: 0,
  /** Admitted (200) overload streams that ended before their last token. */
  cutStreams: 0,
  /**
   * The goodput SLO: a request counts toward goodput when it streamed every token with TTFT ≤ max(ttftFloorMs,
   * ttftOverUnloadedP99 × the unloaded p99 TTFT) and TPOT ≤ max(tpotFloorMs, tpotOverUnloadedP99 × the unloaded p99
   * TPOT) (the configuration's default SLO, widened for a slow model as bench:strategies does).
   */
  goodputSlo: { ttftFloorMs: 1000, ttftOverUnloadedP99: 2, tpotFloorMs: 100, tpotOverUnloadedP99: 2 },
  /** TTFT is back to normal when each later window's median TTFT ≤ this × the unloaded mean, with no 429 in it. */
  recoveryNormalOverUnloadedMean: 1.5,
  recoveryWindowMs: 1000,
} as const;

/** The goodput SLO of a run (OVERLOAD_TARGET.goodputSlo) from its unloaded phase's p99 TTFT and TPOT; NaN in, NaN out. */
export function goodputSlo(unloadedTtftP99Ms: number, unloadedTpotP99Ms: number): { ttftMs: number; tpotMs: number } {
  const g = OVERLOAD_TARGET.goodputSlo;
  const widen = (floor: number, x: number) => (Number.isNaN(x) ? Number.NaN : Math.max(floor, x));
  return { ttftMs: widen(g.ttftFloorMs, g.ttftOverUnloadedP99 * unloadedTtftP99Ms), tpotMs: widen(g.tpotFloorMs, g.tpotOverUnloadedP99 * unloadedTpotP99Ms) };
}

export interface OverloadFigures {
  /** Completion tokens/s the engines serve fed directly at their batch size. */
  capacityTokensPerS: number;
  /** Output tokens/s of overload-phase requests that met the SLO. */
  goodputTokensPerS: number;
  /** p99 of 429 responses' latency (ms); NaN when none was shed. */
  shedP99Ms: number;
  /** p99 TTFT of admitted requests in the overload (ms), and of the unloaded phase. */
  admittedTtftP99Ms: number;
  unloadedTtftP99Ms: number;
  /** Engines taken out of service (region log lines). */
  ejected: number;
  /** (RSS at the end − RSS before the overload) / RSS before. */
  rssGrowth: number;
  /** Seconds from the end of the overload until every later window's TTFT is back to normal; +Infinity: never. */
  recoveryS: number;
  /** Goodput tokens of tenant a and b during the overload. */
  tenantGoodput: [number, number];
  /** Overload-phase requests answered 429. */
  shed: number;
  /** Overload-phase requests answered neither 200 nor 429 (5xx, timeouts, errors), and 200s cut short. */
  other: number;
  cutStreams: number;
  /** The baselines' requests and how many failed: the capacity arm's, and the unloaded phase's (not a full 200). */
  capacity: { requests: number; failed: number };
  unloaded: { requests: number; failed: number };
}

/**
 * The checks; an unshed overload (no 429 at all) fails the 429 latency check (NaN). Goodput is judged against the
 * capacity arm and by the SLO the unloaded phase sets, the admitted TTFT against the unloaded p99: a failed request in
 * those baselines fails the check (named in it).
 */
export function overloadChecks(f: OverloadFigures): Check[] {
  const T = OVERLOAD_TARGET;
  const goodput = ratio(f.goodputTokensPerS, f.capacityTokensPerS);
  const ttft = ratio(f.admittedTtftP99Ms, f.unloadedTtftP99Ms);
  const total = f.tenantGoodput[0] + f.tenantGoodput[1];
  const shareA = total > 0 ? f.tenantGoodput[0] / total : Number.NaN;
  const shareB = total > 0 ? f.tenantGoodput[1] / total : Number.NaN;
  const capacity = { arm: "capacity", ...f.capacity };
  const unloaded = { arm: "unloaded", ...f.unloaded };
  const goodputNote = failuresNote([capacity, unloaded]);
  const ttftNote = failuresNote([unloaded]);
  return [
    { check: `goodput over unloaded capacity${goodputNote}`, value: goodput, limit: T.goodputRatio, ok: goodputNote === "" && atLeast(goodput, T.goodputRatio) },
    { check: "p99 latency of a 429 (ms)", value: f.shedP99Ms, limit: T.shedP99Ms, ok: f.shed > 0 && atMost(f.shedP99Ms, T.shedP99Ms) },
    { check: `admitted p99 TTFT over unloaded${ttftNote}`, value: ttft, limit: T.admittedTtftP99Ratio, ok: ttftNote === "" && atMost(ttft, T.admittedTtftP99Ratio) },
    { check: "engines ejected", value: f.ejected, limit: T.ejected, ok: atMost(f.ejected, T.ejected) },
    { check: "router RSS growth", value: f.rssGrowth, limit: T.rssGrowth, ok: atMost(f.rssGrowth, T.rssGrowth) },
    { check: "TTFT back to normal after the overload (s)", value: f.recoveryS, limit: T.recoveryS, ok: atMost(f.recoveryS, T.recoveryS) },
    { check: "tenant a's share of goodput", value: shareA, limit: T.tenantShareMin, ok: atLeast(shareA, T.tenantShareMin) && atMost(shareA, T.tenantShareMax) },
    { check: "tenant b's share of goodput", value: shareB, limit: T.tenantShareMin, ok: atLeast(shareB, T.tenantShareMin) && atMost(shareB, T.tenantShareMax) },
    { check: "overload requests answered neither 200 nor 429 (5xx, timeouts)", value: f.other, limit: T.other, ok: atMost(f.other, T.other) },
    { check: "admitted overload streams cut short", value: f.cutStreams, limit: T.cutStreams, ok: atMost(f.cutStreams, T.cutStreams) },
  ];
}

/**
 * The `tidegate dev` arm's targets (issue 49, "What it must show"): the whole stack in one process under 10 × the
 * fleet's capacity. Printed in the JSON line's `target` as `dev`, beside the multi-process targets above.
 */
export const DEV_OVERLOAD_TARGET = {
  /** p99 latency of a 429 (ms). */
  shedP99Ms: 50,
  /** p99 TTFT of admitted requests over the configured TTFT SLO (`slo.ttftMs`). */
  admittedTtftP99OverSlo: 1,
  /** Streams that ended without finishing after their 200 (an in-stream error, a cut connection). */
  cutAfter200: 0,
} as const;

/** What the dev arm measured over its overload phase. */
export interface DevOverloadFigures {
  /** p99 of 429 responses' latency (ms); NaN when none was shed. */
  shedP99Ms: number;
  shed: number;
  /** p99 TTFT of admitted requests (ms; +Infinity for one that never had a token). */
  admittedTtftP99Ms: number;
  admitted: number;
  /** The TTFT SLO of the model in dev's configuration (ms). */
  sloTtftMs: number;
  /** Streams answered 200 that did not finish. */
  cutAfter200: number;
}

/** The dev arm's checks; an arm that did not run (undefined) fails, as does one that shed nothing or admitted nothing. */
export function devOverloadChecks(d: DevOverloadFigures | undefined): Check[] {
  const T = DEV_OVERLOAD_TARGET;
  if (d === undefined) return [{ check: "dev arm: tidegate dev under 10 × capacity ran", value: Number.NaN, limit: 1, ok: false }];
  const ttft = ratio(d.admittedTtftP99Ms, d.sloTtftMs);
  return [
    { check: "dev: p99 latency of a 429 (ms)", value: d.shedP99Ms, limit: T.shedP99Ms, ok: d.shed > 0 && atMost(d.shedP99Ms, T.shedP99Ms) },
    { check: "dev: admitted p99 TTFT over the TTFT SLO", value: ttft, limit: T.admittedTtftP99OverSlo, ok: d.admitted > 0 && atMost(ttft, T.admittedTtftP99OverSlo) },
    { check: "dev: streams cut after their 200", value: d.cutAfter200, limit: T.cutAfter200, ok: d.admitted > 0 && atMost(d.cutAfter200, T.cutAfter200) },
  ];
}


/** The verdict of a run: every check holds and nothing shrank it. */
export function overloadVerdict(f: OverloadFigures, shrunk: readonly string[] = []): Verdict {
  return verdictOf(overloadChecks(f), shrunk);
}

/** The bench's whole verdict: the multi-process checks and the dev arm's (undefined: it did not run, which fails). */
export function overloadBenchVerdict(f: OverloadFigures, dev: DevOverloadFigures | undefined, shrunk: readonly string[] = []): Verdict {
  return verdictOf([...overloadChecks(f), ...devOverloadChecks(dev)], shrunk);
}

/**
 * Seconds from `endMs` until TTFT is back to normal: requests are put in `windowMs` windows by their start (from
 * `endMs` on); the answer is the start of the first window from which every window with requests has its median TTFT
 * ≤ `normalMs` and no 429 — +Infinity when the last window with requests is not normal, NaN when none started.
 */
export function recoverySeconds(samples: readonly { startMs: number; ttftMs: number; shed: boolean }[], endMs: number, normalMs: number, windowMs = 1000): number {
  const windows = new Map<number, { ttfts: number[]; shed: boolean }>();
  for (const s of samples) {
    if (s.startMs < endMs) continue;
    const w = Math.floor((s.startMs - endMs) / windowMs);
    const cur = windows.get(w) ?? { ttfts: [], shed: false };
    if (s.shed) cur.shed = true;
    else cur.ttfts.push(s.ttftMs);
    windows.set(w, cur);
  }
  if (windows.size === 0) return Number.NaN;
  const keys = [...windows.keys()].sort((a, b) => a - b);
  let firstGood: number | undefined;
  for (const k of keys) {
    const w = windows.get(k)!;
    const good = !w.shed && (w.ttfts.length === 0 || median(w.ttfts) <= normalMs);
    if (good) firstGood ??= k;
    else firstGood = undefined;
  }
  return firstGood === undefined ? Number.POSITIVE_INFINITY : (firstGood * windowMs) / 1000;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}
