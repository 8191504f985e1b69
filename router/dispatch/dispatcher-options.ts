/**
 * What a Dispatcher (dispatcher.ts) is built with: its stores, clock and region links, and the queue settings of
 * config `queue` (router/batch/service.ts maps them).
 */
import type { Clock } from "../../core/clock.js";
import type { Logger } from "../../core/log.js";
import type { GpuType } from "../../core/models.js";
import type { RegionLink } from "../../core/ports.js";
import type { BatchRecord, FileStore, QueueStore } from "../queue/types.js";
import type { QueueMetrics } from "./dispatch-metrics.js";
import type { ColdWakerOptions } from "./cold-wake.js";
import type { DispatchThresholds, FillPolicy } from "./policy.js";

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
  /**
   * Batch work for a model no region serves (cold-wake.ts; config `queue.coldStart*`): each maintenance pass sends one
   * queued request of such a model to the region whose cold start is soonest once waiting would miss its deadline.
   * Absent: batch waits for warm capacity.
   */
  coldWake?: ColdWakerOptions;
  /** Maintenance period (> 0); default 1000 ms. */
  maintenanceIntervalMs?: number;
  /**
   * One instance's tokens/s (prompt + output) for (model, GPU), for the deadline review (deadlines.ts BatchBooks): each
   * maintenance pass flags batches that cannot finish by their deadline on spare capacity. Absent: no review.
   */
  instanceTokensPerS?: (model: string, gpu: string) => number;
  /**
   * Grant dedicated capacity to batches the deadline review flags (config `queue.dedicatedAtRisk`; issue 37): while a
   * batch cannot finish by its deadline on spare capacity alone, its requests go out at priority 0 — on par with
   * interactive work, not preempted, counted as dedicated tokens — instead of 1. That capacity is the planner's NIW
   * buffer: every request dispatched enters the NIW history (`onDispatched`, forecasts/niw-recorder.ts), whose last
   * hour's mean × β the planner adds to F(m, r), so the plans provision instances for it. Default false (a flagged
   * batch stays on spare capacity until promoteAfterMs promotes its requests).
   */
  dedicatedAtRisk?: boolean;
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
