/**
 * The planning loop (DESIGN "Planner"): every `intervalMs` on the injected Clock, a replica that holds (or takes)
 * the leader lock mints a decisionId, runs a plan, stores the report, and — unless advisory — sends each region its
 * targets over its RegionLink and records the acknowledgements. A replica that is not the leader does nothing that
 * round. The lock's expiry is 2 × intervalMs unless given. A follower (a replica whose last round found another
 * leader) also watches the lock every quarter of its expiry, when that is sooner than its next round: a dead leader
 * is replaced within the lock's expiry plus a quarter of it, not at the follower's next scheduled round, up to a
 * whole interval later. When a replica starts leading it reads the newest stored reports: their decision ids are
 * continued (LeaderLock.continueAfter, for a lock that counts in memory) and they are the `recent` reports each plan
 * is given (last hour's forecast error is judged against them).
 */
import type { Clock, Timer } from "../core/clock.js";
import { TidegateError } from "../core/errors.js";
import type { Logger } from "../core/log.js";
import { silentLogger } from "../core/log.js";
import type { RegionLink, RegionTargets } from "../core/ports.js";
import type { LeaderLock } from "./leader.js";
import type { PlanReport } from "./report.js";
import type { PlanStore } from "./store.js";
import { splitPoolModel } from "./pools.js";

/** What the loop needs: clock, lock, links, store and how to plan. */
export interface PlannerLoopOptions {
  clock: Clock;
  intervalMs: number;
  lock: LeaderLock;
  /** This replica's id in the lock. */
  holder: string;
  lockTtlMs?: number;
  /** Publish plans without sending targets. */
  advisory: boolean;
  links: readonly RegionLink[];
  store: PlanStore;
  /**
   * Runs one plan with the given decision id, the previous report, what started it (absent: the schedule) and the
   * recent reports, newest first (at most RECENT_REPORTS; read from the store when this replica starts leading, so a
   * restart over a persisted store still judges last hour's forecast).
   */
  plan: (decisionId: number, previous: PlanReport | undefined, trigger?: PlanReport["trigger"], recent?: readonly PlanReport[]) => Promise<PlanReport>;
  log?: Logger;
  /** Told of every stored report (a round's, an approval's), e.g. to export its targets and forecasts as metrics. */
  onReport?: (report: PlanReport) => void;
}

/** How many recent reports the loop keeps for `plan` (the newest first). */
export const RECENT_REPORTS = 8;

/** How the regions answered a report's targets, for logs: `{ sent, accepted, refused: ["us-west: why", …] }`. */
export function ackSummary(acks: PlanReport["acks"]): { sent: number; accepted: number; refused: string[] } {
  return {
    sent: acks.length,
    accepted: acks.filter((a) => a.accepted).length,
    refused: acks.filter((a) => !a.accepted).map((a) => (a.error === undefined ? a.region : `${a.region}: ${a.error}`)),
  };
}

/**
 * Targets for one region from a report. Each endpoint's floor is the share of its target the point forecast asks
 * for: ⌈target × point / F⌉ (F covers the forecast's upper bound), never above the target; = target when the
 * plan covered the point forecast itself or the series has no forecast. `floorSteps`: the same share for each
 * forecast step's point forecast, so the floor follows the forecast path through the hour; `upperSteps` the same for
 * each step's 90% upper bound; `demandSteps` each step's band itself in tokens/s (+ the same NIW buffer), which
 * `predictive-hpa` places its floor in. `forecastTokensPerS` is the point forecast
 * (what LT-UA compares observed traffic with: SageServe §6.5.1 "what ARIMA predicted").
 */
export function targetsFor(report: PlanReport, region: string): RegionTargets {
  const endpoints = report.actions
    .filter((a) => a.region === region)
    .map((a) => {
      // A disaggregated model's pool (`model#role`, pools.ts) is planned on its model's forecast.
      const { model, role } = splitPoolModel(a.model);
      const f = report.forecasts.find((x) => x.model === model && x.region === region);
      const shareOf = (tokensPerS: number) => (f !== undefined && f.demandTokensPerS > 0 ? Math.min(1, tokensPerS / f.demandTokensPerS) : 1);
      const floorInstances = Math.min(a.target, Math.ceil(a.target * shareOf(f?.pointDemandTokensPerS ?? 0) - 1e-9));
      // Per forecast step: the same share for the step's point forecast (+ the same NIW buffer), never above the floor.
      const buffer = f === undefined ? 0 : f.pointDemandTokensPerS - f.peak.mean;
      const has = f !== undefined && f.forecastSteps.length > 0;
      const steps = has ? f.forecastSteps.map((b) => Math.min(floorInstances, Math.ceil(a.target * shareOf(b.mean + buffer) - 1e-9))) : undefined;
      const upper = has ? f.forecastSteps.map((b) => Math.min(a.target, Math.ceil(a.target * shareOf(b.upper + buffer) - 1e-9))) : undefined;
      const demand = has ? f.forecastSteps.map((b) => ({ mean: b.mean + buffer, lower: b.lower + buffer, upper: b.upper + buffer })) : undefined;
      return { model, gpu: a.gpu, ...(role === undefined ? {} : { role }), instances: a.target, floorInstances, ...(steps === undefined ? {} : { floorSteps: steps, upperSteps: upper!, demandSteps: demand!, floorStepMs: f!.stepMs }), forecastTokensPerS: f?.pointDemandTokensPerS ?? 0 };
    });
  return { decisionId: report.decisionId, region, madeAtMs: report.madeAtMs, advisory: report.advisory, endpoints };
}

/**
 * What /plans may ask of the planner; only the admin role reaches these (planner/routes.ts). Errors are
 * TidegateErrors: not_found (no such plan), conflict (not advisory, already reviewed, superseded, not leading).
 */
export interface PlanActions {
  /** Sends an advisory plan's targets to the regions (the newest plan only) and records who approved it and when. */
  approve(id: string, by: string): Promise<PlanReport>;
  /** Records that an advisory plan was rejected; nothing is sent. */
  reject(id: string, by: string): Promise<PlanReport>;
  /** Runs a planning round now, off-schedule; resolves with its report. */
  planNow(by: string): Promise<PlanReport>;
}

/** The planning loop (see the file comment). `start()` schedules rounds, `tick()` runs one, `stop()` ends. */
export class PlannerLoop implements PlanActions {
  private timer: Timer | undefined;
  /** A follower's watch on the lock (see the file comment). */
  private watch: Timer | undefined;
  private running: Promise<void> | undefined;
  /** The newest reports, newest first; undefined until read from the store when this replica starts leading. */
  private recent: PlanReport[] | undefined;
  /** Rounds this replica led, and skipped as a follower (for tests and metrics). */
  led = 0;
  followed = 0;
  /** Whether the last round found this replica holding the lock. */
  leading = false;
  /** Whether the last round found another replica holding it (the watch then runs). */
  private following = false;

  constructor(private readonly o: PlannerLoopOptions) {
    if (!(o.intervalMs > 0)) throw new RangeError(`intervalMs must be > 0, got ${o.intervalMs}`);
  }

  start(): void {
    this.timer ??= this.o.clock.every(this.o.intervalMs, () => void this.tick());
    const watchMs = this.lockTtlMs() / 4;
    if (watchMs < this.o.intervalMs)
      this.watch ??= this.o.clock.every(watchMs, () => {
        if (this.following) void this.tick();
      });
  }

  private lockTtlMs(): number {
    return this.o.lockTtlMs ?? 2 * this.o.intervalMs;
  }

  /** Stops the timer, waits for a round in progress, and releases the lock. */
  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = undefined;
    this.watch?.cancel();
    this.watch = undefined;
    await this.running;
    this.leading = false;
    await this.o.lock.release(this.o.holder);
  }

  /** One round (also callable directly). Rounds never overlap: a tick during a round is skipped. */
  tick(): Promise<void> {
    if (this.running !== undefined) return this.running;
    this.running = this.round().then(
      () => undefined,
      (err: unknown) => (this.o.log ?? silentLogger).error("planning round failed", { err: err instanceof Error ? err : String(err) }),
    ).finally(() => (this.running = undefined));
    return this.running;
  }

  async planNow(by: string): Promise<PlanReport> {
    await this.running;
    let report: PlanReport | undefined;
    this.running = this.round({ kind: "manual", by }).then((r) => void (report = r)).finally(() => (this.running = undefined));
    await this.running;
    if (report === undefined) throw new TidegateError("conflict", "this planner replica does not hold the leader lock; try the leader");
    return report;
  }

  async approve(id: string, by: string): Promise<PlanReport> {
    const report = await this.reviewable(id);
    const newest = (await this.o.store.list())[0];
    if (newest !== undefined && newest.id !== id) throw new TidegateError("conflict", `plan ${id} was superseded by ${newest.id}; approve the newest plan`);
    report.acks = await this.send({ ...report, advisory: false });
    report.review = { state: "approved", by, atMs: this.o.clock.now() };
    await this.o.store.put(report);
    this.o.onReport?.(report);
    (this.o.log ?? silentLogger).info("plan approved", { id, by, acks: ackSummary(report.acks) });
    return report;
  }

  async reject(id: string, by: string): Promise<PlanReport> {
    const report = await this.reviewable(id);
    report.review = { state: "rejected", by, atMs: this.o.clock.now() };
    await this.o.store.put(report);
    (this.o.log ?? silentLogger).info("plan rejected", { id, by });
    return report;
  }

  private async reviewable(id: string): Promise<PlanReport> {
    const report = await this.o.store.get(id);
    if (report === undefined) throw new TidegateError("not_found", `no plan ${JSON.stringify(id)}`, { param: "id" });
    if (!report.advisory) throw new TidegateError("conflict", `plan ${id} was not advisory: its targets were sent when it was made`);
    if (report.review !== undefined) throw new TidegateError("conflict", `plan ${id} was already ${report.review.state} by ${report.review.by}`);
    return report;
  }

  private send(report: PlanReport): Promise<PlanReport["acks"]> {
    return Promise.all(
      this.o.links.map(async (link) => {
        try {
          const ack = await link.sendTargets(targetsFor(report, link.region));
          return { region: ack.region, decisionId: ack.decisionId, accepted: ack.accepted };
        } catch (err) {
          return { region: link.region, decisionId: report.decisionId, accepted: false, error: err instanceof Error ? err.message : String(err) };
        }
      }),
    );
  }

  /** One round; the report, or undefined when another replica leads. */
  private async round(trigger?: PlanReport["trigger"]): Promise<PlanReport | undefined> {
    const log = this.o.log ?? silentLogger;
    const got = await this.o.lock.acquire(this.o.holder, this.lockTtlMs());
    this.following = got === "held_by_other";
    if (got === "held_by_other") {
      this.leading = false;
      this.followed++;
      return undefined;
    }
    this.leading = true;
    if (this.recent === undefined || got === "acquired") {
      this.recent = (await this.o.store.list()).slice(0, RECENT_REPORTS);
      const newest = Math.max(0, ...this.recent.map((r) => r.decisionId));
      if (newest > 0) await this.o.lock.continueAfter?.(newest);
    }
    const decisionId = await this.o.lock.nextDecisionId(this.o.holder);
    if (decisionId === undefined) {
      this.followed++;
      return undefined;
    }
    this.led++;
    const recent = this.recent;
    const report = await this.o.plan(decisionId, recent[0], trigger, recent);
    if (!report.advisory && !this.o.advisory) report.acks = await this.send(report);
    this.recent = [report, ...recent.filter((r) => r.id !== report.id)].slice(0, RECENT_REPORTS);
    await this.o.store.put(report);
    this.o.onReport?.(report);
    const acks = ackSummary(report.acks);
    (acks.refused.length > 0 ? log.warn : log.info).call(log, "plan", { id: report.id, decisionId, status: report.solver.status, advisory: report.advisory, acks, trigger: trigger?.kind ?? "schedule" });
    return report;
  }
}
