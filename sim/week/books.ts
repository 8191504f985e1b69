/**
 * The week replay's accounting: the request callbacks that record TTFT and E2E (interactive) and deadlines (batch),
 * and the minute sample of active instances. Methods, not closures: ten million requests a week.
 */
import type { RequestCallbacks } from "../../core/ports.js";
import { Histogram, HistogramSeries } from "./histogram.js";
import type { RunState, WeekOptions } from "./state.js";
import type { VirtualClock } from "../../core/clock.js";
import type { WorkloadSummary } from "../workload/generator.js";
import { sloFor } from "../../core/config.js";

const MINUTE = 60_000;
const HOUR = 3_600_000;

/** Empty books for a run of `o` (regions and ledgers are filled in by the wiring and at the end). */
export function openBooks(o: WeekOptions, clock: VirtualClock, summary: WorkloadSummary, regionCount: number): RunState {
  const models = o.workload.models.map((m) => m.name);
  const durationMs = o.workload.days * 24 * HOUR;
  const minutes = Math.ceil(durationMs / MINUTE) + 1;
  const hours = Math.ceil(durationMs / HOUR) + 1;
  return {
    o, clock, regions: [], models, durationMs,
    ttft: models.map(() => new Histogram()),
    e2e: models.map(() => new Histogram()),
    ttftHourly: models.map(() => new HistogramSeries(hours, HOUR)),
    tpot: models.map(() => new Histogram()),
    slo: models.map((m) => sloFor(o.fleet.config.slo, m)),
    sloHourly: models.map(() => ({ requests: new Float64Array(hours), met: new Float64Array(hours) })),
    ttftMinute: o.minuteSeries === true ? models.map(() => new HistogramSeries(minutes, MINUTE)) : [],
    activeSamples: models.map(() => Array.from({ length: regionCount }, () => new Float64Array(hours))),
    tokensHourly: models.map(() => new Float64Array(hours)),
    iw: 0, iwUnserved: 0,
    niw: { submitted: 0, done: 0, withinDeadline: 0, late: 0, duplicates: 0, pendingByDeadlineHour: new Int32Array(hours + Math.ceil(o.workload.niwDeadlineMs / HOUR) + 2) },
    plans: [], plannerMs: 0, wallMs: 0, summary, ledgers: [],
  };
}

/**
 * An interactive request of model `mi` arriving at `atMs` that was never served (no region took it, or it failed
 * before its first token): counted, and recorded as infinitely late in every TTFT and E2E figure (issue 11: a
 * request turned away is an SLO miss, not a request that does not exist).
 */
export function noteUnserved(s: RunState, mi: number, atMs: number): void {
  s.iwUnserved++;
  s.ttft[mi]!.addUnserved();
  s.e2e[mi]!.addUnserved();
  s.ttftHourly[mi]!.addUnserved(atMs);
  s.ttftMinute[mi]?.addUnserved(atMs);
  const h = Math.floor(atMs / HOUR);
  if (h < s.sloHourly[mi]!.requests.length) s.sloHourly[mi]!.requests[h]!++;
}

/**
 * Records one interactive request's TTFT, E2E and TPOT (or, if it fails before its first token, that it went
 * unserved), and whether it met its model's SLO (both targets; one that fails after its first token is a miss),
 * in the hour it arrived. TPOT = (done − first token) / (output tokens − 1); a one-token answer has none.
 */
export class IwHooks implements RequestCallbacks {
  private firstMs = -1;

  constructor(
    private readonly s: RunState,
    private readonly mi: number,
    private readonly atMs: number,
    private readonly outputTokens: number,
  ) {}

  onFirstToken(t: number): void {
    this.firstMs = t;
    const ms = t - this.atMs;
    this.s.ttft[this.mi]!.add(ms);
    this.s.ttftHourly[this.mi]!.add(this.atMs, ms);
    this.s.ttftMinute[this.mi]?.add(this.atMs, ms);
  }

  onDone(t: number): void {
    const s = this.s;
    const mi = this.mi;
    s.e2e[mi]!.add(t - this.atMs);
    const slo = s.slo[mi]!;
    let met = this.firstMs >= 0 && this.firstMs - this.atMs <= slo.ttftMs;
    if (this.outputTokens > 1 && this.firstMs >= 0) {
      const tpot = (t - this.firstMs) / (this.outputTokens - 1);
      s.tpot[mi]!.add(tpot);
      met &&= tpot <= slo.tpotMs;
    }
    const h = Math.floor(this.atMs / HOUR);
    const books = s.sloHourly[mi]!;
    if (h < books.requests.length) {
      books.requests[h]!++;
      if (met) books.met[h]!++;
    }
  }

  onError(): void {
    if (this.firstMs >= 0) {
      this.s.e2e[this.mi]!.addUnserved();
      const h = Math.floor(this.atMs / HOUR);
      if (h < this.s.sloHourly[this.mi]!.requests.length) this.s.sloHourly[this.mi]!.requests[h]!++;
    } else noteUnserved(this.s, this.mi, this.atMs);
  }
}

/** Records one batch request's completion against its deadline, and tells the queue it is done. */
export class NiwHooks implements RequestCallbacks {
  constructor(
    private readonly s: RunState,
    private readonly deadlineMs: number,
    private readonly complete: (atMs: number) => void,
  ) {}

  onDone(atMs: number): void {
    this.complete(atMs);
    const n = this.s.niw;
    n.done++;
    n.pendingByDeadlineHour[Math.floor(this.deadlineMs / HOUR)]!--;
    if (atMs <= this.deadlineMs) n.withinDeadline++;
    else n.late++;
  }
}

/** Counts a batch request submitted (pending against its deadline hour). */
export function noteNiwSubmitted(s: RunState, deadlineMs: number): void {
  s.niw.submitted++;
  s.niw.pendingByDeadlineHour[Math.floor(deadlineMs / HOUR)]!++;
}

/** One minute's sample of active instances (serving, deploying and draining) per model and region. */
export function sampleActive(s: RunState, ri: number, instances: readonly { model: string; state: string }[]): void {
  const h = Math.floor(s.clock.now() / HOUR);
  const counts = new Map<string, number>();
  for (const i of instances) if (i.state !== "spot") counts.set(i.model, (counts.get(i.model) ?? 0) + 1);
  s.models.forEach((m, mi) => {
    s.activeSamples[mi]![ri]![h]! += counts.get(m) ?? 0;
  });
}
