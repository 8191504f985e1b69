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
 * intake of batches left in `validating` (e.g. after a crash), finalizes batches, and refreshes the metrics. Policy lives in policy.ts; this file only wires it to the ports.
 *
 * Lease owners (issue 32 item 4): each dispatcher incarnation opens a lease owner in the store (a fencing token) and
 * heartbeats it every `ownerTtlMs` / 5; everything it claims is leased to that owner. Each maintenance pass (after its
 * own heartbeat) takes back the leases of owners whose heartbeat ran out (`QueueStore.reclaimDead`): a crashed router's
 * requests return to the queue `ownerTtlMs` after its last heartbeat, not `leaseMs` after its claims. A dispatcher
 * whose own heartbeat answers that it was declared dead (paused or cut off from the store for longer than the TTL)
 * aborts everything it runs under the old token — the store would drop those results anyway (`Fenced`) — and opens
 * a new owner.
 */
import { setMaxListeners } from "node:events";
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError, findTidegateError, isTidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import { ChunkFormatter, makeUsage, parseOpenAIRequest, type ApiKind } from "../../core/openai.js";
import type { FinishReason, GenerateRequest, RegionLink, RegionTelemetry, Unsubscribe, Usage } from "../../core/ports.js";
import { QueueCode, type BatchRecord, type ClaimedRequest, type FileStore, type QueueStore } from "../queue/types.js";
import { finalizeBatch } from "./finalize.js";
import { ResultWriter } from "./result-writer.js";
import { decodePayload, responseLine } from "./lines.js";
import type { QueueMetrics } from "./dispatch-metrics.js";
import { capacitySignals, fillSlots, fillTarget, nextGate, requestPriority, type DispatchThresholds, type EndpointGate, type FillPolicy } from "./policy.js";
import type { GpuType } from "../../core/models.js";

export interface DispatcherOptions {
  store: QueueStore;
  files: FileStore;
  clock: Clock;
  links: readonly RegionLink[];
  /** Models the queue serves (config.models names). */
  models: readonly string[];
  thresholds: DispatchThresholds;
  /**
   * Fill what is idle, with hysteresis (policy.ts `FillPolicy`). Absent: §6.3's rule as written (1 or 2 requests
   * per endpoint per report).
   */
  fill?: FillPolicy;
  /** KV tokens one serving instance of `model` on `gpu` holds (0 = unknown); needed by `fill`. */
  kvCapacityTokens?: (model: string, gpu: GpuType) => number;
  promoteAfterMs: number;
  leaseMs: number;
  /**
   * Pace dispatch (config `queue.paceDispatch`): under `fill`, the requests one report grants an endpoint that also
   * serves interactive traffic go out spread evenly over the first half of the time since that region's previous
   * report, not all at once. Default false (every request at once).
   */
  pace?: boolean;
  /**
   * Paced requests go out in groups of this many (default 1), the groups spread evenly: requests sent together reach
   * the engine before its next iteration boundary and share one prefill, and a prefill's time is mostly fixed cost
   * (llama3.2-3b on 2 × h100: 9.3 ms for one 136-token prompt, 9.8 ms for four), so a group of four holds up an
   * interactive prompt behind it about as long as one request does, four times less often.
   */
  paceGroup?: number;
  /**
   * Refill on an idle fleet (config `queue.refillIdle`): under `fill`, a batch request a region serves is replaced at
   * once by the next queued request of its model, sent to the same region, while that region's last report showed
   * a serving instance of the model, none of its interactive traffic, and every endpoint under §6.3's threshold
   * (`dispatchOneBelow`): like every dispatch, never to a region that reports itself at or above it. A replacement
   * never adds to what the region holds: the reports' grants set how many run (fillTo, hysteresis, nothing while
   * engines queue), and completions no longer leave that many slots empty until the next report. Not gated on fillTo,
   * the hysteresis gate or the queue: requests granted together also end together, and their KV (prompt + output)
   * peaks just before they do, above fillTo, and a cohort's arrival queues some of it for a prefill or two, so those
   * rules stop the refill for the cohort's whole life, at exactly the moment it is needed. Default false.
   */
  refill?: boolean;
  /** Maintenance period (> 0); default 1000 ms. */
  maintenanceIntervalMs?: number;
  /**
   * Lease-owner heartbeat TTL (> 0, config `queue.ownerTtlMs`); default 5000 ms. The owner is heartbeat every TTL / 5;
   * a dispatcher that stops heartbeating (crash, pause, cut off from the store) has its leases taken back by any
   * dispatcher's maintenance once the TTL has run out.
   */
  ownerTtlMs?: number;
  /** Results wait at most this long to be written together with others (ResultWriter); default 2 ms. */
  resultLingerMs?: number;
  /** Batches in `validating` older than this are (re)taken into intake by maintenance; default 10 000 ms. */
  intakeGraceMs?: number;
  /** Validates and enqueues a `validating` batch (router/batch/intake.ts). */
  intake?: (batch: BatchRecord) => Promise<void>;
  metrics?: QueueMetrics;
  /** Called for every request sent to a region: prompt + max_tokens (the planner's NIW demand history). */
  onDispatched?(model: string, region: string, tokens: number, atMs: number): void;
  log?: Logger;
}

/** A request the region finished: its text (empty in callback shape), finish reason and usage. */
interface Finished {
  text: string;
  reason: FinishReason;
  usage: Usage;
}

/** Pacing spreads one report's requests over at most half of this (a region that reported long ago: 1 s). */
const MAX_PACE_WINDOW_MS = 2000;

/** Parked requests per model (see Dispatcher.parked) before further ones are released at once. */
const MAX_PARKED = 1024;

/** Error codes that mean the request itself is bad (its result is an error line), not that the region failed. */
const REQUEST_FAULTS = new Set(["invalid_request", "invalid_json", "model_not_found", "payload_too_large"]);

export class Dispatcher {
  private readonly o: Required<Omit<DispatcherOptions, "intake" | "metrics" | "resultLingerMs" | "onDispatched" | "fill" | "kvCapacityTokens" | "pace" | "paceGroup" | "refill">> & Pick<DispatcherOptions, "intake" | "metrics" | "onDispatched" | "fill" | "kvCapacityTokens" | "pace" | "paceGroup" | "refill">;
  /** Batch gate per region endpoint (`region|endpointId`), for `fill`. */
  private readonly gates = new Map<string, EndpointGate>();
  /** Mean prompt + max output tokens of the requests sent per model (EWMA), for `fill`; 1024 until one is seen. */
  private readonly requestTokens = new Map<string, number>();
  /** Per model: mean KV one request holds over its life (prompt + half its max tokens), the same running mean. */
  private readonly holdTokens = new Map<string, number>();
  /**
   * Per `region|model`: batch requests sent there and not yet served or failed, and the most its last report lets
   * run at once under `fill` (Σ over serving endpoints of target × KV tokens / holdTokens; at least 1).
   */
  private readonly sentNow = new Map<string, number>();
  private readonly sentCap = new Map<string, number>();
  private readonly modelSet: Set<string>;
  private readonly unsubscribers: Unsubscribe[] = [];
  private readonly inflight = new Set<Promise<void>>();
  private readonly intaking = new Set<string>();
  private readonly abort = new AbortController();
  private timer: Timer | undefined;
  private maintaining: Promise<void> | undefined;
  private stopped = false;
  private readonly results: ResultWriter;
  /** Claimed requests being run now → their region and the end of their lease as last set (renewRunning). */
  private readonly running = new Map<string, { region: string; untilMs: number; owner: number | undefined }>();
  /** Clock time of each region's last telemetry report: only requests in a region that reports are renewed. */
  private readonly lastReportMs = new Map<string, number>();
  /** Per `region|model`: whether the region's last report allows refills (see `refill`). */
  private readonly refillOk = new Map<string, boolean>();
  /** Per `region|model`: completions to replace on the next microtask, and the region's link. */
  private readonly refills = new Map<string, { link: RegionLink; model: string; count: number }>();
  /** Claimed requests waiting for their paced send time (`pace`): stop() cancels them and gives their leases back. */
  private readonly pacing = new Set<{ timer: Timer; c: ClaimedRequest; resolve: (done?: Promise<void>) => void }>();
  /** Requests whose dispatch was aborted by stop(); released when stop() finishes. */
  private readonly aborted: ClaimedRequest[] = [];
  /** This incarnation's lease owner (fencing token), once opened; undefined before, and between a fencing and the next. */
  private owner: number | undefined;
  /** The openOwner call in progress. */
  private opening: Promise<number | undefined> | undefined;
  /** The heartbeat in progress (the timer and maintenance share it). */
  private beating: Promise<void> | undefined;
  private beatTimer: Timer | undefined;
  /** Per owner: aborts the dispatches of requests leased to it (on stop, or when it is fenced). */
  private readonly fences = new Map<number, AbortController>();
  /**
   * Claimed requests of batches kept within regions (API key `regions`) that a report from another region claimed:
   * they wait here, oldest first per model, for a report from a region they allow (so a restricted request at the
   * head of a model's queue never blocks the requests behind it). Past half their lease, or beyond
   * `MAX_PARKED` per model, they are released back to the queue.
   */
  private readonly parked = new Map<string, { c: ClaimedRequest; allowed: ReadonlySet<string>; sinceMs: number }[]>();
  /** Each active batch's allowed regions (null = any), read once per batch. */
  private readonly batchRegions = new Map<string, Promise<ReadonlySet<string> | null>>();
  /** The store answered queue_unavailable (Redis down) and nothing has succeeded since: logged once per outage. */
  private queueDown = false;
  /** The last status logged per batch (debug logs of state changes); terminal ones are dropped after a tick. */
  private readonly states = new Map<string, { status: string; terminal: boolean }>();

  /** Logs (debug) a batch whose status changed since this replica last saw it. */
  private noteState(b: { id: string; status: string; model?: string | null; total?: number; completed?: number; failed?: number }): void {
    const prev = this.states.get(b.id)?.status;
    if (prev === b.status) return;
    this.states.set(b.id, { status: b.status, terminal: b.status === "completed" || b.status === "failed" || b.status === "expired" || b.status === "cancelled" });
    this.o.log.debug("batch state", { batch: b.id, from: prev ?? null, to: b.status, model: b.model ?? null, total: b.total, completed: b.completed, failed: b.failed });
  }

  /** Requests sent per region (for tests and logs). */
  readonly sentByRegion = new Map<string, number>();

  constructor(opts: DispatcherOptions) {
    if (!(opts.leaseMs > 0)) throw new RangeError(`leaseMs must be > 0, got ${opts.leaseMs}`);
    if (opts.ownerTtlMs !== undefined && !(opts.ownerTtlMs > 0)) throw new RangeError(`ownerTtlMs must be > 0, got ${opts.ownerTtlMs}`);
    this.o = { maintenanceIntervalMs: 1000, ownerTtlMs: 5000, intakeGraceMs: 10_000, log: silentLogger, ...opts };
    this.modelSet = new Set(opts.models);
    this.results = new ResultWriter({ store: opts.store, clock: opts.clock, lingerMs: opts.resultLingerMs ?? 2 });
    // Every in-flight dispatch listens on the one stop signal.
    setMaxListeners(0, this.abort.signal);
  }

  /** Opens this incarnation's lease owner, subscribes to every region's telemetry and starts maintenance. */
  start(): void {
    void this.openOwner();
    this.beatTimer = this.o.clock.every(this.o.ownerTtlMs / 5, () => void this.beat());
    for (const link of this.o.links) this.unsubscribers.push(link.subscribe((t) => this.onTelemetry(link, t)));
    this.timer = this.o.clock.every(this.o.maintenanceIntervalMs, () => void this.maintain());
  }

  /** This incarnation's lease owner now (undefined before it is open; tests). */
  get leaseOwner(): number | undefined {
    return this.owner;
  }

  /** Opens a new lease owner unless one is being opened; resolves to it (undefined when the store failed). */
  private openOwner(): Promise<number | undefined> {
    this.opening ??= this.o.store.openOwner(this.o.clock.now(), this.o.ownerTtlMs).then(
      (owner) => {
        if (this.stopped) return undefined;
        this.owner = owner;
        const fence = new AbortController();
        setMaxListeners(0, fence.signal);
        this.fences.set(owner, fence);
        this.o.log.debug("lease owner opened", { owner });
        return owner;
      },
      (err) => {
        this.storeFailed("opening a lease owner failed; nothing is claimed until the next try", {}, err);
        return undefined;
      },
    ).finally(() => (this.opening = undefined));
    return this.opening;
  }

  /**
   * Heartbeats this incarnation's owner (or opens one if it has none). When the store answers that the owner was
   * declared dead, everything running under it is aborted and a new owner is opened.
   */
  private beat(): Promise<void> {
    this.beating ??= (async () => {
      const owner = this.owner;
      if (this.stopped) return;
      if (owner === undefined) {
        await this.openOwner();
        return;
      }
      let live: boolean;
      try {
        live = await this.o.store.heartbeat(owner, this.o.clock.now(), this.o.ownerTtlMs);
      } catch (err) {
        return this.storeFailed("lease heartbeat failed; past queue.ownerTtlMs without one, this dispatcher's leases are taken back", { owner }, err);
      }
      if (live || this.owner !== owner || this.stopped) return;
      this.fenced(owner);
      await this.openOwner();
    })().finally(() => (this.beating = undefined));
    return this.beating;
  }

  /** `owner` was declared dead (its leases taken back): stop everything leased to it. */
  private fenced(owner: number): void {
    this.o.log.warn("this dispatcher's leases were taken back (its heartbeat had run out: paused or cut off from the queue for over queue.ownerTtlMs); aborting what it runs under them and starting again as a new owner", { owner, running: [...this.running.values()].filter((r) => r.owner === owner).length });
    this.o.metrics?.ownersFenced.inc();
    this.owner = undefined;
    this.fences.get(owner)?.abort(new TidegateError("cancelled", `lease owner ${owner} was fenced`));
    this.fences.delete(owner);
    for (const [model, list] of this.parked) {
      const keep = list.filter((p) => p.c.owner !== owner);
      if (keep.length === 0) this.parked.delete(model);
      else this.parked.set(model, keep);
    }
    for (const p of [...this.pacing]) {
      if (p.c.owner !== owner) continue;
      p.timer.cancel();
      this.pacing.delete(p);
      p.resolve();
    }
  }

  /** Leases up to `max` of `model`'s oldest requests to this incarnation's owner (none while it has none). */
  private claim(model: string, max: number): Promise<ClaimedRequest[]> {
    const run = (owner: number | undefined) => (owner === undefined || this.stopped ? [] : this.o.store.claim(model, max, this.o.clock.now(), this.o.leaseMs, owner));
    return this.owner !== undefined ? Promise.resolve(run(this.owner)) : this.openOwner().then(run);
  }

  /** The signal that aborts `c`'s dispatch: its owner's fence (stop or fencing), else stop's. */
  private signalFor(c: ClaimedRequest): AbortSignal {
    return (c.owner === undefined ? undefined : this.fences.get(c.owner)?.signal) ?? this.abort.signal;
  }

  /** Gives back `requests`' leases, each under the owner it was claimed for. Returns how many were requeued. */
  private async releaseLeases(requests: readonly ClaimedRequest[], nowMs: number): Promise<number> {
    const byOwner = new Map<number | undefined, string[]>();
    for (const c of requests) {
      const ids = byOwner.get(c.owner) ?? [];
      ids.push(c.requestId);
      byOwner.set(c.owner, ids);
    }
    let n = 0;
    for (const [owner, ids] of byOwner) n += await this.o.store.release(ids, nowMs, owner);
    return n;
  }

  /** Stops: no new claims; in-flight requests are aborted and their leases given back (QueueStore.release). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const u of this.unsubscribers.splice(0)) u();
    this.timer?.cancel();
    this.beatTimer?.cancel();
    this.abort.abort();
    for (const f of this.fences.values()) f.abort();
    for (const p of this.pacing) {
      p.timer.cancel();
      this.aborted.push(p.c);
      p.resolve();
    }
    this.pacing.clear();
    await Promise.allSettled([this.maintaining, this.beating, this.opening]);
    await this.idle(); // includes runs started by claims that were answered after the abort
    await this.results.drain();
    await this.releaseParked(true).catch((err) => this.o.log.warn("releasing parked requests on stop failed; their leases return them", { err }));
    // Hand the aborted requests back now instead of letting their leases run out.
    if (this.aborted.length > 0) {
      await this.releaseLeases(this.aborted.splice(0), this.o.clock.now()).catch((err) => this.o.log.warn("releasing leases on stop failed; they return when this dispatcher's owner is found dead or they expire", { err }));
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
    const signals: readonly { model: string; region: string; slots: number; beside?: boolean }[] = this.o.fill === undefined ? capacitySignals(report, this.modelSet, this.o.thresholds) : this.fillSignals(report, this.o.fill);
    for (const s of signals) {
      const slots = s.slots - this.runParked(link, s.model, s.slots);
      if (slots <= 0) continue;
      const p = this.claim(s.model, slots).then(
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
    return new Promise<void>((resolve) => {
      const entry = {
        c,
        resolve,
        timer: this.o.clock.after(delayMs, () => {
          this.pacing.delete(entry);
          resolve(this.route(link, c)); // the route's own failure reaches track()
        }),
      };
      this.pacing.add(entry);
    });
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

  /** Requests per model for one report under the fill policy: each endpoint's gate, then its free KV. */
  private fillSignals(report: RegionTelemetry, p: FillPolicy): { model: string; region: string; slots: number; beside: boolean }[] {
    const out: { model: string; region: string; slots: number; beside: boolean }[] = [];
    for (const m of report.models) {
      if (!this.modelSet.has(m.model)) continue;
      let slots = 0;
      // Interactive traffic for this model in this region: fill less beside it (policy.ts fillTarget).
      const target = fillTarget(p, m);
      const policy = target === p.fillTo ? p : { ...p, fillTo: target };
      // Refill while none of the model's interactive traffic is there and every endpoint is under §6.3's threshold
      // (see `refill`).
      let under = true;
      let serving = 0;
      let capacityTokens = 0;
      for (const e of m.endpoints) {
        const key = `${report.region}|${e.endpointId}`;
        const gate = nextGate(this.gates.get(key) ?? { open: true, below: 0 }, e.effectiveMemoryUtilization, p);
        this.gates.set(key, gate);
        if (e.servingInstances <= 0) continue;
        serving++;
        under &&= e.effectiveMemoryUtilization < p.dispatchOneBelow;
        const capacity = e.servingInstances * (this.o.kvCapacityTokens?.(m.model, e.gpu) ?? 0);
        capacityTokens += capacity;
        slots += fillSlots(gate, e.effectiveMemoryUtilization, capacity, this.requestTokens.get(m.model) ?? 1024, m.waiting, policy);
      }
      const key = `${report.region}|${m.model}`;
      this.refillOk.set(key, target === p.fillTo && serving > 0 && under);
      // With refill, what the dispatcher has sent there and not yet seen served is counted here, not only in the
      // report's utilization (a scrape and a report old, and lower than the requests' reservations while they run):
      // at most the count whose mean KV is the target, so grants and refills together hold the region at its fill
      // target. Without refill, completions already take the count down between reports, as before.
      if (capacityTokens > 0 && this.o.refill === true) {
        const cap = Math.max(1, Math.floor((target * capacityTokens) / (this.holdTokens.get(m.model) ?? 512)));
        this.sentCap.set(key, cap);
        slots = Math.min(slots, Math.max(0, cap - (this.sentNow.get(key) ?? 0)));
      } else this.sentCap.delete(key);
      if (slots > 0) out.push({ model: m.model, region: report.region, slots, beside: target !== p.fillTo });
    }
    return out;
  }

  private track(p: Promise<void>): void {
    this.inflight.add(p);
    void p
      .catch((err) => this.o.log.error("batch dispatch failed unexpectedly; the lease will return the request", { err }))
      .finally(() => this.inflight.delete(p));
  }

  /** Sends parked requests that `link`'s region may serve, oldest first, at most `slots`; returns how many. */
  private runParked(link: RegionLink, model: string, slots: number): number {
    const list = this.parked.get(model);
    if (list === undefined || list.length === 0) return 0;
    let sent = 0;
    for (let i = 0; i < list.length && sent < slots; ) {
      if (!list[i]!.allowed.has(link.region)) {
        i++;
        continue;
      }
      const [p] = list.splice(i, 1);
      this.track(this.run(link, p!.c));
      sent++;
    }
    return sent;
  }

  /** The regions `batchId` may be served in (null = any), read once per batch. */
  private regionsOf(batchId: string): Promise<ReadonlySet<string> | null> {
    let r = this.batchRegions.get(batchId);
    if (r === undefined) {
      r = this.o.store.getBatch(batchId).then((b) => (b?.allowedRegions === undefined ? null : new Set(b.allowedRegions)));
      // A failed read is not cached: the next claim of this batch asks again.
      r.catch(() => this.batchRegions.delete(batchId));
      this.batchRegions.set(batchId, r);
    }
    return r;
  }

  /** Runs a claimed request on `link`, or parks it when its batch may not be served in that region. */
  private async route(link: RegionLink, c: ClaimedRequest): Promise<void> {
    let allowed: ReadonlySet<string> | null;
    try {
      allowed = await this.regionsOf(c.batchId);
    } catch (err) {
      return this.storeFailed("reading a batch's regions failed; the lease will return the request", { request: c.requestId }, err);
    }
    if (allowed === null || allowed.has(link.region)) return this.run(link, c);
    const list = this.parked.get(c.model) ?? [];
    this.parked.set(c.model, list);
    if (this.stopped || list.length >= MAX_PARKED) {
      await this.releaseLeases([c], this.o.clock.now()).catch((err) => this.storeFailed("releasing a request failed; its lease returns it", { request: c.requestId }, err));
      return;
    }
    list.push({ c, allowed, sinceMs: this.o.clock.now() });
  }

  /** Releases parked requests that have waited half their lease (and, on stop, all of them). */
  private async releaseParked(all: boolean): Promise<void> {
    const now = this.o.clock.now();
    const out: ClaimedRequest[] = [];
    for (const [model, list] of this.parked) {
      const keep = list.filter((p) => !all && now - p.sinceMs < this.o.leaseMs / 2);
      for (const p of list) if (!keep.includes(p)) out.push(p.c);
      if (keep.length === 0) this.parked.delete(model);
      else this.parked.set(model, keep);
    }
    if (out.length > 0) await this.releaseLeases(out, now);
  }

  /** Runs one claimed request (runClaimed), its lease kept renewed by maintenance while it runs (renewRunning). */
  private async run(link: RegionLink, c: ClaimedRequest): Promise<void> {
    this.running.set(c.requestId, { region: link.region, untilMs: c.leaseUntilMs, owner: c.owner });
    const key = `${link.region}|${c.model}`;
    this.sentNow.set(key, (this.sentNow.get(key) ?? 0) + 1);
    const left = { done: false };
    try {
      await this.runClaimed(link, c, () => this.left(key, left));
    } finally {
      this.running.delete(c.requestId);
      this.left(key, left);
    }
  }

  /** A request sent to `key`'s region no longer runs there (once per request). */
  private left(key: string, flag: { done: boolean }): void {
    if (flag.done) return;
    flag.done = true;
    this.sentNow.set(key, (this.sentNow.get(key) ?? 1) - 1);
  }

  /**
   * Replaces a request `link`'s region served with the next queued one of `model` (option `refill`), if its last
   * report allows it. Completions of one event-loop turn are claimed together (one store call).
   */
  private refill(link: RegionLink, model: string): void {
    if (this.o.refill !== true || this.o.fill === undefined || this.stopped) return;
    const key = `${link.region}|${model}`;
    if (this.refillOk.get(key) !== true) return;
    // Only back up to the cap the last report set (it may have lowered it).
    if ((this.sentNow.get(key) ?? 0) + (this.refills.get(key)?.count ?? 0) >= (this.sentCap.get(key) ?? Number.POSITIVE_INFINITY)) return;
    const pending = this.refills.get(key);
    if (pending !== undefined) {
      pending.count++;
      return;
    }
    this.refills.set(key, { link, model, count: 1 });
    const p = Promise.resolve().then(async () => {
      const r = this.refills.get(key)!;
      this.refills.delete(key);
      if (this.stopped || this.refillOk.get(key) !== true) return;
      const slots = r.count - this.runParked(r.link, r.model, r.count);
      if (slots <= 0) return;
      let claimed: ClaimedRequest[];
      try {
        claimed = await this.claim(r.model, slots);
      } catch (err) {
        return this.storeFailed("queue claim failed", { model: r.model, region: r.link.region }, err);
      }
      this.queueUp();
      for (const c of claimed) this.track(this.route(r.link, c));
    });
    this.track(p);
  }

  /**
   * Extends, by one lease from now, the leases of running requests that end within half a lease (QueueStore.renew),
   * so a request that runs longer than its lease is not requeued and sent again — only in regions that reported
   * within the last half lease: a hung region's requests are left to run out and go elsewhere.
   */
  private async renewRunning(): Promise<void> {
    const now = this.o.clock.now();
    const due: string[] = [];
    const byOwner = new Map<number | undefined, string[]>();
    for (const [rid, r] of this.running) {
      if (r.untilMs - now >= this.o.leaseMs / 2) continue;
      if (now - (this.lastReportMs.get(r.region) ?? -Infinity) > this.o.leaseMs / 2) continue;
      due.push(rid);
      const ids = byOwner.get(r.owner) ?? [];
      ids.push(rid);
      byOwner.set(r.owner, ids);
    }
    if (due.length === 0) return;
    const untilMs = now + this.o.leaseMs;
    try {
      for (const [owner, ids] of byOwner) await this.o.store.renew(ids, untilMs, owner);
    } catch (err) {
      // The rest of the maintenance pass still runs; the next pass tries again.
      return this.storeFailed("renewing leases failed; they may run out and their requests run again", { requests: due.length }, err);
    }
    for (const rid of due) {
      const r = this.running.get(rid);
      if (r !== undefined) r.untilMs = untilMs;
    }
  }

  /**
   * Sends one claimed request to `link` and writes its result (or leaves the lease to expire on region failure);
   * `served` is called as soon as the region has served it, before the result is written.
   */
  private async runClaimed(link: RegionLink, c: ClaimedRequest, served: () => void): Promise<void> {
    const payload = decodePayload(c.payload);
    const kind: ApiKind = payload.url === "/v1/chat/completions" ? "chat" : "completion";
    const nowMs = this.o.clock.now();
    const priority = requestPriority(c.enqueuedAtMs, nowMs, this.o.promoteAfterMs);
    let parsed;
    try {
      parsed = parseOpenAIRequest(kind, payload.body);
    } catch (err) {
      const te = findTidegateError(err)!;
      return this.write(c, false, responseLine(payload.custom_id, c.requestId, te.status, te.toOpenAI()));
    }
    const req: GenerateRequest = { id: c.requestId, model: c.model, kind, promptTokens: parsed.promptTokens, maxTokens: parsed.maxTokens, priority, batch: true, body: payload.body };
    this.o.metrics?.dispatched.inc({ model: c.model, region: link.region, priority: String(priority) });
    this.o.onDispatched?.(c.model, link.region, parsed.promptTokens + parsed.maxTokens, nowMs);
    const seen = this.requestTokens.get(c.model);
    this.requestTokens.set(c.model, seen === undefined ? parsed.promptTokens + parsed.maxTokens : 0.9 * seen + 0.1 * (parsed.promptTokens + parsed.maxTokens));
    const hold = parsed.promptTokens + parsed.maxTokens / 2;
    const held = this.holdTokens.get(c.model);
    this.holdTokens.set(c.model, held === undefined ? hold : 0.9 * held + 0.1 * hold);
    this.sentByRegion.set(link.region, (this.sentByRegion.get(link.region) ?? 0) + 1);
    const signal = this.signalFor(c);
    const outcome = link.submit === undefined ? await this.stream(link, req, signal) : await this.submitted(link, req, signal);
    if ("err" in outcome) {
      const te = findTidegateError(outcome.err);
      if (te !== undefined && REQUEST_FAULTS.has(te.code)) {
        return this.write(c, false, responseLine(payload.custom_id, c.requestId, te.status, te.toOpenAI()));
      }
      if (this.abort.signal.aborted) this.aborted.push(c);
      else if (signal.aborted) this.o.log.debug("batch request aborted: its lease owner was fenced (the lease is another dispatcher's now)", { request: c.requestId, owner: c.owner });
      else this.o.log.warn("batch request failed in region; its lease will return it to the queue", { request: c.requestId, region: link.region, err: outcome.err });
      return;
    }
    // Served: its slot in the region is free now, before the result is written.
    served();
    this.refill(link, c.model);
    const created = Math.floor(this.o.clock.now() / 1000);
    const fmt = new ChunkFormatter(kind, (kind === "chat" ? "chatcmpl-" : "cmpl-") + c.requestId.replace(/[^A-Za-z0-9]/g, ""), c.model, created);
    await this.write(c, true, responseLine(payload.custom_id, c.requestId, 200, fmt.fullResponse(outcome.text, outcome.reason, outcome.usage)));
  }

  /** Streams the request through the link (every live link): the text, the finish reason and usage. */
  private async stream(link: RegionLink, req: GenerateRequest, signal: AbortSignal): Promise<Finished | { err: unknown }> {
    let text = "";
    try {
      for await (const ev of link.dispatch(req, signal)) {
        if (ev.type === "token") text += ev.text;
        else return { text, reason: ev.finishReason, usage: ev.usage };
      }
      throw new Error("stream ended without a done event");
    } catch (err) {
      return { err };
    }
  }

  /**
   * The callback shape (`RegionLink.submit`, a region in this process on the same clock: the week replay): no token
   * text, usage from the counts; finish "length" when the output ran to max_tokens, else "stop". stop() gives up
   * the wait (the request's lease is released like an aborted stream's).
   */
  private submitted(link: RegionLink, req: GenerateRequest, signal: AbortSignal): Promise<Finished | { err: unknown }> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve({ err: signal.reason });
      const onAbort = () => resolve({ err: signal.reason });
      signal.addEventListener("abort", onAbort, { once: true });
      const end = (r: Finished | { err: unknown }) => {
        signal.removeEventListener("abort", onAbort);
        resolve(r);
      };
      try {
        link.submit!(req, {
          onDone: (_atMs, generated) => end({ text: "", reason: generated >= req.maxTokens ? "length" : "stop", usage: makeUsage(req.promptTokens, generated) }),
          onError: (_atMs, err) => end({ err }),
        });
      } catch (err) {
        end({ err });
      }
    });
  }

  private async write(c: ClaimedRequest, ok: boolean, line: string): Promise<void> {
    try {
      const code = await this.results.write(c.requestId, { ok, line }, c.owner);
      this.o.metrics?.results.inc({ outcome: code < 0 ? "dropped" : ok ? "ok" : "error" });
      if (code === QueueCode.Finalizing) void this.maintain();
    } catch (err) {
      this.o.log.error("writing a batch result failed; the lease will return the request", { request: c.requestId, err });
    }
  }

  /** One maintenance pass (also run by the timer); concurrent calls share the pass in progress. */
  maintain(): Promise<void> {
    if (this.maintaining !== undefined) return this.maintaining;
    this.maintaining = this.maintainOnce()
      .then(() => this.queueUp())
      .catch((err) => this.storeFailed("queue maintenance failed", {}, err))
      .finally(() => (this.maintaining = undefined));
    return this.maintaining;
  }

  private async maintainOnce(): Promise<void> {
    const { store, clock } = this.o;
    // Its own heartbeat first, so that a pass running late never finds this incarnation's own owner dead.
    await this.beat();
    const rc = await store.reclaimDead(clock.now());
    if (rc.leases > 0) {
      this.o.metrics?.leasesReclaimed.inc(rc.leases);
      this.o.log.warn("took back the leases of a dispatcher whose heartbeat ran out (crashed or cut off); its requests are queued again", { owners: rc.owners, leases: rc.leases, requeued: rc.requeued });
    } else if (rc.owners > 0) this.o.log.debug("lease owners expired with no lease left", { owners: rc.owners });
    await this.releaseParked(false);
    await this.renewRunning();
    const rq = await store.requeueExpired(clock.now(), 10_000);
    this.o.metrics?.leaseExpiries.inc(rq.expiredLeases);
    const active = await store.activeBatchIds();
    for (const id of this.batchRegions.keys()) if (!active.includes(id)) this.batchRegions.delete(id);
    for (const id of active) {
      if (this.stopped) return;
      let b = await store.getBatch(id);
      if (b === undefined) continue;
      const nowMs = clock.now();
      if ((b.status === "in_progress" || b.status === "validating") && nowMs >= b.expiresAtMs) {
        await store.expire(id, nowMs);
        b = (await store.getBatch(id))!;
      }
      this.noteState(b);
      if (b.status === "validating" && nowMs - b.createdAtMs >= this.o.intakeGraceMs) this.startIntake(b);
      if (b.status === "finalizing") {
        await finalizeBatch(store, this.o.files, b, nowMs);
        const after = await store.getBatch(id);
        if (after !== undefined) this.noteState(after);
      }
    }
    for (const [id, st] of this.states) if (st.terminal) this.states.delete(id);
    const nowMs = clock.now();
    this.o.metrics?.observe(await store.stats(this.o.models, nowMs, this.o.promoteAfterMs), nowMs);
  }
}
