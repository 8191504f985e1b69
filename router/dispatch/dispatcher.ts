/**
 * The NIW queue manager loop (SageServe §6.3). Each telemetry report from a region is one capacity signal: for
 * every model endpoint under the thresholds the dispatcher claims 1 or 2 of that model's oldest requests (a lease)
 * and sends them to that region through RegionLink.dispatch with priority 1, or 0 once older than promoteAfterMs.
 * Results are written once by request id (QueueStore.complete). A request whose region fails keeps its lease and
 * returns to the queue when the lease runs out. A request whose batch is kept within regions (the creating API
 * key's `regions`) is sent only there: claimed by another region's report it is parked until an allowed region
 * reports room (or released at half its lease). While a request runs in a region that still reports, each
 * maintenance pass renews its lease once less than half of it is left, so a request that outlasts its lease is not
 * sent twice; a region that stopped reporting (hung) gets no renewals, and its requests return when their leases
 * run out. A maintenance pass on the Clock requeues expired leases, expires batches past their window, starts
 * intake of batches left in `validating` (e.g. after a crash), finalizes batches, and refreshes the metrics.
 *
 * This file wires the jobs together; each lives in its own file: policy.ts (the pure rules: §6.3's capacity signals,
 * the fill policy), leases.ts (lease owner, heartbeat, fencing, claims, renewals), parking.ts (requests kept within
 * regions), fill.ts (fill and refill books), send.ts (one request over RegionLink.submit, its result line),
 * maintenance.ts (the periodic pass), cold-wake.ts (batch work for a model no region serves: one request sent to
 * the region whose cold start is soonest, when waiting for warm capacity would miss a deadline).
 */
import type { Clock, Timer } from "../../core/clock.js";
import { isTidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { GpuType } from "../../core/models.js";
import type { RegionLink, RegionTelemetry, Unsubscribe } from "../../core/ports.js";
import { QueueCode, type BatchRecord, type ClaimedRequest, type FileStore, type QueueStore } from "../queue/types.js";
import type { QueueMetrics } from "./dispatch-metrics.js";
import { FillBook } from "./fill.js";
import { LeaseBook } from "./leases.js";
import { ColdWaker, queuedWork, type ColdWake } from "./cold-wake.js";
import { BatchStates, maintainOnce } from "./maintenance.js";
import { BatchBooks, type BatchCapacityView } from "./deadlines.js";
import { MAX_PACE_WINDOW_MS, Pacer } from "./pacing.js";
import { Parking } from "./parking.js";
import { capacitySignals, type DispatchThresholds, type FillPolicy } from "./policy.js";
import { ResultWriter } from "./result-writer.js";
import { faultLine, isRequestFault, okLine, prepare, send } from "./send.js";
import type { DispatcherOptions } from "./dispatcher-options.js";

export type { DispatcherOptions } from "./dispatcher-options.js";

type ResolvedOptions = Required<Omit<DispatcherOptions, "intake" | "metrics" | "resultLingerMs" | "onDispatched" | "fill" | "kvCapacityTokens" | "pace" | "paceGroup" | "refill" | "coldWake" | "instanceTokensPerS" | "dedicatedAtRisk">> & Pick<DispatcherOptions, "intake" | "metrics" | "onDispatched" | "fill" | "kvCapacityTokens" | "pace" | "paceGroup" | "refill" | "instanceTokensPerS" | "dedicatedAtRisk">;

export class Dispatcher {
  private readonly o: ResolvedOptions;
  private readonly modelSet: Set<string>;
  private readonly unsubscribers: Unsubscribe[] = [];
  private readonly inflight = new Set<Promise<void>>();
  private readonly intaking = new Set<string>();
  private timer: Timer | undefined;
  private beatTimer: Timer | undefined;
  private maintaining: Promise<void> | undefined;
  private stopped = false;
  private readonly results: ResultWriter;
  private readonly leases: LeaseBook;
  private readonly parking: Parking;
  private readonly fill: FillBook;
  private readonly states: BatchStates;
  /** Batch work for a model no region serves (cold-wake.ts); absent when `coldWake` is not set. */
  private readonly coldWake: ColdWaker | undefined;
  /** Deadlines and spare/dedicated tokens per batch (deadlines.ts). */
  private readonly books: BatchBooks;
  /** Clock time of each region's last telemetry report: only requests in a region that reports are renewed. */
  private readonly lastReportMs = new Map<string, number>();
  /** Per `region|model`: completions to replace on the next microtask, and the region's link. */
  private readonly refills = new Map<string, { link: RegionLink; model: string; count: number }>();
  /** Claimed requests waiting for their paced send time (`pace`): stop() cancels them and gives their leases back. */
  private readonly pacing: Pacer;
  /** Requests whose dispatch was aborted by stop(); released when stop() finishes. */
  private readonly aborted: ClaimedRequest[] = [];
  /** The store answered queue_unavailable (Redis down) and nothing has succeeded since: logged once per outage. */
  private queueDown = false;

  /** Requests sent per region (for tests and logs). */
  readonly sentByRegion = new Map<string, number>();

  constructor(opts: DispatcherOptions) {
    if (!(opts.leaseMs > 0)) throw new RangeError(`leaseMs must be > 0, got ${opts.leaseMs}`);
    if (opts.ownerTtlMs !== undefined && !(opts.ownerTtlMs > 0)) throw new RangeError(`ownerTtlMs must be > 0, got ${opts.ownerTtlMs}`);
    this.o = { maintenanceIntervalMs: 1000, ownerTtlMs: 5000, intakeGraceMs: 10_000, log: silentLogger, ...opts };
    this.modelSet = new Set(opts.models);
    this.results = new ResultWriter({ store: opts.store, clock: opts.clock, lingerMs: opts.resultLingerMs ?? 2 });
    this.leases = new LeaseBook({
      store: opts.store,
      clock: opts.clock,
      leaseMs: opts.leaseMs,
      ownerTtlMs: this.o.ownerTtlMs,
      log: this.o.log,
      metrics: opts.metrics,
      storeFailed: (msg, fields, err) => this.storeFailed(msg, fields, err),
      onFenced: (owner) => this.fenced(owner),
      stopped: () => this.stopped,
    });
    this.parking = new Parking(opts.store, opts.leaseMs);
    this.fill = new FillBook(this.modelSet, opts.refill === true, opts.kvCapacityTokens);
    this.books = new BatchBooks(this.o.clock, this.o.log, opts.metrics, opts.instanceTokensPerS);
    this.states = new BatchStates(this.o.log);
    this.pacing = new Pacer(opts.clock);
    this.coldWake = opts.coldWake === undefined ? undefined : new ColdWaker(opts.coldWake);
  }

  /** Opens this incarnation's lease owner, subscribes to every region's telemetry and starts maintenance. */
  start(): void {
    void this.leases.open();
    this.beatTimer = this.o.clock.every(this.o.ownerTtlMs / 5, () => void this.leases.beat());
    for (const link of this.o.links) this.unsubscribers.push(link.subscribe((t) => this.onTelemetry(link, t)));
    this.timer = this.o.clock.every(this.o.maintenanceIntervalMs, () => void this.maintain());
  }

  /** This incarnation's lease owner now (undefined before it is open; tests). */
  get leaseOwner(): number | undefined {
    return this.leases.current;
  }

  /** Its owner was fenced (leases.ts): parked and paced requests leased to it are dropped (another owns them now). */
  private fenced(owner: number): void {
    this.parking.dropOwner(owner);
    this.pacing.dropOwner(owner);
  }

  /** Stops: no new claims; in-flight requests are aborted and their leases given back (QueueStore.release). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const u of this.unsubscribers.splice(0)) u();
    this.timer?.cancel();
    this.beatTimer?.cancel();
    this.leases.abortAll();
    this.aborted.push(...this.pacing.cancelAll());
    await Promise.allSettled([this.maintaining, ...this.leases.pending()]);
    await this.idle(); // includes runs started by claims that were answered after the abort
    await this.results.drain();
    await this.releaseParked(true).catch((err) => this.o.log.warn("releasing parked requests on stop failed; their leases return them", { err }));
    // Hand the aborted requests back now instead of letting their leases run out.
    if (this.aborted.length > 0) {
      await this.leases.release(this.aborted.splice(0), this.o.clock.now()).catch((err) => this.o.log.warn("releasing leases on stop failed; they return when this dispatcher's owner is found dead or they expire", { err }));
    }
  }

  /** Resolves when every request sent so far has finished (tests). */
  async idle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  /** Takes `batch` into intake now unless this process already is (called by the Batch API on create). */
  startIntake(batch: BatchRecord): void {
    if (this.o.intake === undefined || this.intaking.has(batch.id) || this.stopped) return;
    this.intaking.add(batch.id);
    const p = this.o.intake(batch)
      .catch((err) => this.o.log.error("batch intake failed", { batch: batch.id, err }))
      .finally(() => {
        this.intaking.delete(batch.id);
        this.inflight.delete(p);
      });
    this.inflight.add(p);
  }

  /** One capacity signal per report (SageServe §6.3): claim and send what the region's endpoints can take. */
  onTelemetry(link: RegionLink, report: RegionTelemetry): void {
    if (this.stopped) return;
    const now = this.o.clock.now();
    const sinceLastMs = now - (this.lastReportMs.get(link.region) ?? now);
    this.lastReportMs.set(link.region, now);
    this.coldWake?.note(link.region, report, now);
    this.books.noteReport(report);
    const signals: readonly { model: string; region: string; slots: number; beside?: boolean }[] = this.o.fill === undefined ? capacitySignals(report, this.modelSet, this.o.thresholds) : this.fill.signals(report, this.o.fill);
    for (const s of signals) {
      const slots = s.slots - this.runParked(link, s.model, s.slots);
      if (slots <= 0) continue;
      const p = this.leases.claim(s.model, slots).then(
        (claimed) => {
          this.queueUp();
          // Paced beside interactive traffic (a fill of dozens at once is one burst of batch prefills that the
          // interactive prompts arriving behind it wait for): the i-th goes i × step later, all within the first half
          // of the report interval, so they are running and counted in the region's next report before it grants
          // more. An idle fleet is not paced: there is nobody to protect, and a later start is lost throughput.
          // In groups of `paceGroup` (one shared prefill each), the groups spread evenly.
          const group = Math.max(1, Math.floor(this.o.paceGroup ?? 1));
          const groups = Math.ceil(claimed.length / group);
          const step = this.o.pace === true && s.beside === true && groups > 1 ? Math.min(sinceLastMs, MAX_PACE_WINDOW_MS) / 2 / groups : 0;
          claimed.forEach((c, i) => {
            const at = Math.floor(i / group) * step;
            this.track(at <= 0 ? this.route(link, c) : this.paced(at, link, c));
          });
        },
        (err) => this.storeFailed("queue claim failed", { model: s.model, region: s.region }, err),
      );
      this.track(p);
    }
  }

  /** Routes `c` after `delayMs` on the clock, unless stop() comes first (then its lease is given back). */
  private paced(delayMs: number, link: RegionLink, c: ClaimedRequest): Promise<void> {
    // A claim answered after stop(): nothing more goes out; stop() gives the lease back once idle().
    if (this.stopped) {
      this.aborted.push(c);
      return Promise.resolve();
    }
    return this.pacing.after(delayMs, c, () => this.route(link, c));
  }

  /**
   * Logs a failed store call; while the store is unavailable (Redis down) only the first failure is logged, as a
   * warning that dispatch pauses: claims stay in Redis, leases run on, results already finished keep retrying.
   */
  private storeFailed(msg: string, fields: Record<string, unknown>, err: unknown): void {
    if (!isTidegateError(err, "queue_unavailable")) return this.o.log.error(msg, { ...fields, err });
    if (!this.queueDown) this.o.log.warn("batch queue unavailable; dispatch pauses until it is back", { ...fields, err });
    this.queueDown = true;
  }

  private queueUp(): void {
    if (this.queueDown) this.o.log.warn("batch queue available again; dispatch resumes");
    this.queueDown = false;
  }

  private track(p: Promise<void>): void {
    this.inflight.add(p);
    void p
      .catch((err) => this.o.log.error("batch dispatch failed unexpectedly; the lease will return the request", { err }))
      .finally(() => this.inflight.delete(p));
  }

  /** Sends parked requests that `link`'s region may serve, oldest first, at most `slots`; returns how many. */
  private runParked(link: RegionLink, model: string, slots: number): number {
    const out = this.parking.take(link.region, model, slots);
    for (const c of out) this.track(this.run(link, c));
    return out.length;
  }

  /** Runs a claimed request on `link`, or parks it when its batch may not be served in that region. */
  private async route(link: RegionLink, c: ClaimedRequest): Promise<void> {
    const allowed = await this.allowedFor(c);
    if (allowed === undefined) return;
    if (allowed === null || allowed.has(link.region)) return this.run(link, c);
    if (this.stopped || !this.parking.park(c, allowed, this.o.clock.now())) await this.giveBack(c);
  }

  /** The regions `c`'s batch may run in (null = any); undefined when the store could not say (logged: its lease returns it). */
  private async allowedFor(c: ClaimedRequest): Promise<ReadonlySet<string> | null | undefined> {
    try {
      return await this.parking.regionsOf(c.batchId);
    } catch (err) {
      this.storeFailed("reading a batch's regions failed; the lease will return the request", { request: c.requestId }, err);
      return undefined;
    }
  }

  /** Releases `c` back to the queue now (should that fail, its lease returns it). */
  private async giveBack(c: ClaimedRequest): Promise<void> {
    await this.leases.release([c], this.o.clock.now()).catch((err) => this.storeFailed("releasing a request failed; its lease returns it", { request: c.requestId }, err));
  }

  /** Releases parked requests that have waited half their lease (and, on stop, all of them). */
  private async releaseParked(all: boolean): Promise<void> {
    const now = this.o.clock.now();
    const out = this.parking.expired(all, now);
    if (out.length > 0) await this.leases.release(out, now);
  }

  /** Runs one claimed request (runClaimed), its lease kept renewed by maintenance while it runs (LeaseBook). */
  private async run(link: RegionLink, c: ClaimedRequest): Promise<void> {
    this.leases.running.set(c.requestId, { region: link.region, untilMs: c.leaseUntilMs, owner: c.owner });
    const key = `${link.region}|${c.model}`;
    this.fill.enter(key);
    const left = { done: false };
    try {
      await this.runClaimed(link, c, () => this.left(key, left));
    } finally {
      this.leases.running.delete(c.requestId);
      this.left(key, left);
    }
  }

  /** A request sent to `key`'s region no longer runs there (once per request). */
  private left(key: string, flag: { done: boolean }): void {
    if (flag.done) return;
    flag.done = true;
    this.fill.leave(key);
  }

  /**
   * Replaces a request `link`'s region served with the next queued one of `model` (option `refill`), if its last
   * report allows it. Completions of one event-loop turn are claimed together (one store call).
   */
  private refill(link: RegionLink, model: string): void {
    if (this.o.refill !== true || this.o.fill === undefined || this.stopped) return;
    const key = `${link.region}|${model}`;
    if (!this.fill.refillAllowed(key)) return;
    // Only back up to the cap the last report set (it may have lowered it).
    if (!this.fill.refillFits(key, this.refills.get(key)?.count ?? 0)) return;
    const pending = this.refills.get(key);
    if (pending !== undefined) {
      pending.count++;
      return;
    }
    this.refills.set(key, { link, model, count: 1 });
    const p = Promise.resolve().then(async () => {
      const r = this.refills.get(key)!;
      this.refills.delete(key);
      if (this.stopped || !this.fill.refillAllowed(key)) return;
      const slots = r.count - this.runParked(r.link, r.model, r.count);
      if (slots <= 0) return;
      let claimed: ClaimedRequest[];
      try {
        claimed = await this.leases.claim(r.model, slots);
      } catch (err) {
        return this.storeFailed("queue claim failed", { model: r.model, region: r.link.region }, err);
      }
      this.queueUp();
      for (const c of claimed) this.track(this.route(r.link, c));
    });
    this.track(p);
  }

  /**
   * Sends one claimed request to `link` (send.ts) and writes its result (or leaves the lease to expire on region
   * failure); `served` is called as soon as the region has served it, before the result is written.
   */
  private async runClaimed(link: RegionLink, c: ClaimedRequest, served: () => void): Promise<void> {
    const nowMs = this.o.clock.now();
    const prepared = prepare(c, nowMs, this.o.promoteAfterMs);
    if ("errorLine" in prepared) return this.write(c, false, prepared.errorLine);
    const { req, kind, customId } = prepared;
    // A batch flagged at risk of its deadline is granted dedicated capacity where configured (dedicatedAtRisk).
    if (req.priority === 1 && this.o.dedicatedAtRisk === true && this.books.atRisk(c.batchId)) req.priority = 0;
    this.o.metrics?.dispatched.inc({ model: c.model, region: link.region, priority: String(req.priority) });
    this.o.onDispatched?.(c.model, link.region, req.promptTokens + req.maxTokens, nowMs);
    this.fill.noteSent(c.model, req.promptTokens, req.maxTokens);
    this.books.noteSent(c.model, req.promptTokens + req.maxTokens);
    this.sentByRegion.set(link.region, (this.sentByRegion.get(link.region) ?? 0) + 1);
    const signal = this.leases.signalFor(c);
    const outcome = await send(link, req, signal);
    if ("err" in outcome) {
      if (isRequestFault(outcome.err)) return this.write(c, false, faultLine(customId, c.requestId, outcome.err));
      if (this.leases.stopSignal.aborted) this.aborted.push(c);
      else if (signal.aborted) this.o.log.debug("batch request aborted: its lease owner was fenced (the lease is another dispatcher's now)", { request: c.requestId, owner: c.owner });
      else this.o.log.warn("batch request failed in region; its lease will return it to the queue", { request: c.requestId, region: link.region, err: outcome.err });
      return;
    }
    // Served: its slot in the region is free now, before the result is written.
    served();
    this.books.noteServed(c.model, outcome.usage.completion_tokens, req.priority);
    this.refill(link, c.model);
    // The output tokens by capacity go into the store with the result, once: the batch's counts survive a restart.
    const tokens = req.priority === 1 ? { spareTokens: outcome.usage.completion_tokens } : { dedicatedTokens: outcome.usage.completion_tokens };
    await this.write(c, true, okLine(customId, c, kind, outcome, Math.floor(this.o.clock.now() / 1000)), tokens);
  }

  private async write(c: ClaimedRequest, ok: boolean, line: string, tokens?: { spareTokens?: number; dedicatedTokens?: number }): Promise<void> {
    try {
      const code = await this.results.write(c.requestId, { ok, line, ...tokens }, c.owner);
      this.o.metrics?.results.inc({ outcome: code < 0 ? "dropped" : ok ? "ok" : "error" });
      if (code === QueueCode.Finalizing) void this.maintain();
    } catch (err) {
      this.o.log.error("writing a batch result failed; the lease will return the request", { request: c.requestId, err });
    }
  }

  /**
   * Sends one queued request of each model in `wakes` to the first region of the wake's ranking that the request's
   * batch may run in (cold-wake.ts): the region holds it while it brings an instance up. A request no ranked region
   * may take goes back to the queue. The wake ends when that request does (or when nothing was claimed or sent).
   */
  private wakeCold(wakes: readonly ColdWake[]): void {
    for (const w of wakes) {
      if (this.stopped || !w.regions.some((r) => this.o.links.some((l) => l.region === r))) {
        this.coldWake!.ended(w.model);
        continue;
      }
      const p = this.leases.claim(w.model, 1).then(
        async (claimed) => {
          this.queueUp();
          await Promise.all(claimed.map((c) => this.wakeWith(w, c)));
        },
        (err) => this.storeFailed("queue claim failed", { model: w.model, region: w.region }, err),
      );
      this.track(p.finally(() => this.coldWake!.ended(w.model)));
    }
  }

  /** Runs a wake's claimed request in the soonest region its batch allows; releases it when none does. */
  private async wakeWith(w: ColdWake, c: ClaimedRequest): Promise<void> {
    const allowed = await this.allowedFor(c);
    if (allowed === undefined) return;
    const link = w.regions.map((r) => this.o.links.find((l) => l.region === r)).find((l) => l !== undefined && (allowed === null || allowed.has(l.region)));
    if (link === undefined || this.stopped) {
      this.o.log.info("batch work for a model no region serves: no region its batch allows scales the model from zero; the request goes back to the queue", { model: w.model, request: c.requestId, regions: w.regions });
      return this.giveBack(c);
    }
    this.o.log.info("batch work for a model no region serves: a queued request goes to the region whose cold start is soonest", { model: w.model, region: link.region, reason: w.reason, coldStartMs: link.region === w.region && Number.isFinite(w.coldStartMs) ? Math.round(w.coldStartMs) : null });
    return this.run(link, c);
  }

  /** What the Batch API object shows of a batch's capacity and deadline (deadlines.ts); undefined when nothing is known. */
  capacityView(batchId: string): BatchCapacityView | undefined {
    return this.books.capacityView(batchId);
  }

  /** One maintenance pass (maintenance.ts; also run by the timer); concurrent calls share the pass in progress. */
  maintain(): Promise<void> {
    if (this.maintaining !== undefined) return this.maintaining;
    this.maintaining = maintainOnce({
      store: this.o.store,
      files: this.o.files,
      clock: this.o.clock,
      log: this.o.log,
      metrics: this.o.metrics,
      models: this.o.models,
      promoteAfterMs: this.o.promoteAfterMs,
      intakeGraceMs: this.o.intakeGraceMs,
      leases: this.leases,
      lastReportMs: this.lastReportMs,
      releaseParked: () => this.releaseParked(false),
      forgetBatchesBut: (active) => this.parking.forgetBatchesBut(active),
      startIntake: (b) => this.startIntake(b),
      stopped: () => this.stopped,
      states: this.states,
      // Only while some region reports a model it scales from zero and nobody serves (the queue's stats cost a scan).
      ...(this.coldWake?.watching(this.o.clock.now()) === true ? { observed: (batches, stats) => this.wakeCold(this.coldWake!.due(queuedWork(batches, stats), this.o.clock.now())) } : {}),
      review: (batches) => this.books.review(batches),
    })
      .then(() => this.queueUp())
      .catch((err) => this.storeFailed("queue maintenance failed", {}, err))
      .finally(() => (this.maintaining = undefined));
    return this.maintaining;
  }
}
