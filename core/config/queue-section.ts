/** The `queue` section: the batch queue's backend (embedded journal or Redis) and the dispatch rules of SageServe §6.3. */
import { readRedisTls, redactUrl, type RedisTlsConfig } from "./redis-tls.js";
import type { ObjectReader } from "../validate.js";

export interface QueueConfig {
  backend: "embedded" | "redis";
  /** redis:// or rediss:// (TLS); an ACL user and password go in the URL (`redis://user:password@host:port`). */
  redisUrl: string;
  /** TLS files for Redis (core/redis.ts); any of them turns TLS on, as a rediss:// URL does. */
  redisTls: RedisTlsConfig;
  keyPrefix: string;
  dataDir: string;
  /** SageServe §6.3: below this endpoint utilization one NIW request is dispatched, below the second two. */
  dispatchOneBelow: number;
  dispatchTwoBelow: number;
  /**
   * Fill what is idle (router/dispatch/policy.ts FillPolicy; default true): per report an open endpoint gets as many
   * requests as its free KV up to `fillTo` holds (at most `maxPerReport`); an endpoint that reached
   * dispatchOneBelow reopens only after `reopenReports` reports under `reopenBelow`. false: §6.3's 1-or-2 rule.
   */
  fillIdle: boolean;
  fillTo: number;
  /** Fill target while the region also serves the model's interactive traffic (default 0.15; ≤ fillTo). */
  fillToBeside: number;
  /**
   * Fill target where every engine of the model preempts batch work for interactive requests (its telemetry reports
   * preemptible KV) and no interactive traffic is there (default 0.9; fillTo ≤ it ≤ 1; router/dispatch/policy.ts).
   */
  fillToPreemptible: number;
  reopenBelow: number;
  reopenReports: number;
  maxPerReport: number;
  /**
   * Beside interactive traffic, spread the requests one report grants an endpoint over the first half of the region's
   * report interval instead of sending them at once (default true): a burst of batch prefills admitted together holds
   * up the interactive prompts that arrive behind it (router/dispatch/README.md, "Pacing").
   */
  paceDispatch: boolean;
  /**
   * Paced requests go out this many at a time (default 4), so those sent together share one prefill in the engine
   * (router/dispatch/README.md, "Pacing"); 1 sends them one by one.
   */
  paceGroup: number;
  /**
   * On an idle fleet, replace each batch request a region serves with the next queued one at once, while that
   * region's last report shows none of the model's interactive traffic and every endpoint under `dispatchOneBelow`
   * (default true; router/dispatch/README.md, "Refill and the sent count"). Without it the slots a completion frees
   * stay empty until the region's next report.
   */
  refillIdle: boolean;
  /**
   * Batch work for a model no region serves (scale from zero, issue 33; router/dispatch/cold-wake.ts): the dispatcher
   * sends one of its queued requests to the region whose cold start is expected soonest — held there, it brings an
   * instance up — once waiting for warm capacity would miss a batch's deadline: less than the cold start + the queued
   * requests' work at one instance's throughput + `coldStartMarginMs` (default 600 000) left; or once its oldest
   * request has waited `coldStartAfterMs` (default 3 600 000; 0 = never for waiting alone). A request's work is
   * estimated at `coldStartOutputTokens` (default 256) output tokens from the performance model.
   */
  coldStartMarginMs: number;
  coldStartAfterMs: number;
  coldStartOutputTokens: number;
  promoteAfterMs: number;
  /**
   * Batches that cannot finish by their deadline on spare capacity get dedicated capacity (priority 0) through the
   * planner's NIW buffer (default false; router/dispatch/dispatcher-options.ts `dedicatedAtRisk`).
   */
  dedicatedAtRisk: boolean;
  leaseMs: number;
  /**
   * Lease-owner heartbeat TTL (default 5000 ms; router/dispatch/README.md, "A dispatcher that dies"): a dispatcher
   * heartbeats its owner every TTL / 5, and once a dispatcher's heartbeat has run out for this long any dispatcher
   * (a restarted one, another replica) takes its leases back, instead of waiting `leaseMs`.
   */
  ownerTtlMs: number;
  maxFileBytes: number;
  /** How long a batch may run before it expires ("24h" = 86 400 000 ms); tests shorten it. */
  completionWindowMs: number;
  /**
   * Embedded backend: when the journal has a line it cannot read, keep the valid prefix and move the rest to
   * `queue.journal.corrupt-N` instead of refusing to start (default false; `--recover-journal` sets it). A last line
   * cut short by a crash needs neither: it is moved aside with a warning (router/queue/journal.ts).
   */
  recoverJournal: boolean;
}

/** Reads the `queue` object: a redis:// or rediss:// URL, and dispatch thresholds in order (fillToBeside ≤ fillTo ≤ dispatchOneBelow ≥ dispatchTwoBelow, reopenBelow). */
export function parseQueue(qr: ObjectReader): QueueConfig {
  const queue: QueueConfig = {
    backend: qr.string("backend", "embedded", { oneOf: ["embedded", "redis"] }) as QueueConfig["backend"],
    redisUrl: qr.string("redisUrl", "redis://127.0.0.1:6379"),
    redisTls: readRedisTls(qr.object("redisTls")),
    keyPrefix: qr.string("keyPrefix", "tidegate:"),
    dataDir: qr.string("dataDir", ".data"),
    dispatchOneBelow: qr.number("dispatchOneBelow", 0.6, { gt: 0, max: 1 }),
    dispatchTwoBelow: qr.number("dispatchTwoBelow", 0.5, { gt: 0, max: 1 }),
    fillIdle: qr.boolean("fillIdle", true),
    fillTo: qr.number("fillTo", 0.55, { gt: 0, max: 1 }),
    fillToBeside: qr.number("fillToBeside", 0.15, { gt: 0, max: 1 }),
    fillToPreemptible: qr.number("fillToPreemptible", 0.9, { gt: 0, max: 1 }),
    reopenBelow: qr.number("reopenBelow", 0.45, { gt: 0, max: 1 }),
    reopenReports: qr.number("reopenReports", 3, { integer: true, min: 1 }),
    maxPerReport: qr.number("maxPerReport", 64, { integer: true, min: 1 }),
    paceDispatch: qr.boolean("paceDispatch", true),
    paceGroup: qr.number("paceGroup", 4, { integer: true, min: 1 }),
    refillIdle: qr.boolean("refillIdle", true),
    coldStartMarginMs: qr.number("coldStartMarginMs", 600_000, { min: 0 }),
    coldStartAfterMs: qr.number("coldStartAfterMs", 3_600_000, { min: 0 }),
    coldStartOutputTokens: qr.number("coldStartOutputTokens", 256, { integer: true, min: 1 }),
    promoteAfterMs: qr.number("promoteAfterMs", 10 * 3600_000, { gt: 0 }),
    dedicatedAtRisk: qr.boolean("dedicatedAtRisk", false),
    leaseMs: qr.number("leaseMs", 120_000, { gt: 0 }),
    ownerTtlMs: qr.number("ownerTtlMs", 5000, { integer: true, min: 50 }),
    maxFileBytes: qr.number("maxFileBytes", 200 * 1024 * 1024, { integer: true, min: 1024 }),
    completionWindowMs: qr.number("completionWindowMs", 24 * 3600_000, { gt: 0 }),
    recoverJournal: qr.boolean("recoverJournal", false),
  };
  if (!/^rediss?:\/\//.test(queue.redisUrl)) qr.fail("redisUrl", `must start with redis:// or rediss:// (TLS), got ${JSON.stringify(redactUrl(queue.redisUrl))}`);
  if (queue.dispatchTwoBelow > queue.dispatchOneBelow) qr.fail("dispatchTwoBelow", `must be ≤ dispatchOneBelow (${queue.dispatchOneBelow})`);
  if (queue.fillTo > queue.dispatchOneBelow) qr.fail("fillTo", `must be ≤ dispatchOneBelow (${queue.dispatchOneBelow})`);
  if (queue.fillToBeside > queue.fillTo) qr.fail("fillToBeside", `must be ≤ fillTo (${queue.fillTo})`);
  if (queue.fillToPreemptible < queue.fillTo) qr.fail("fillToPreemptible", `must be ≥ fillTo (${queue.fillTo})`);
  if (queue.reopenBelow > queue.dispatchOneBelow) qr.fail("reopenBelow", `must be ≤ dispatchOneBelow (${queue.dispatchOneBelow})`);
  qr.done();
  return queue;
}
