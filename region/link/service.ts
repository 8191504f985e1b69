/**
 * What a region offers the global tier, whichever link carries it: a telemetry snapshot, request generation and
 * the planner's targets. The region runtime (region/runtime/runtime.ts, every region shape) implements it; the in-process and gRPC RegionLink
 * adapters (region/link/) wrap any implementation.
 */
import type { RegionName } from "../../core/models.js";
import type { EventSink, Flow } from "../../core/push.js";
import type { GenerateRequest, RegionInstances, RegionTargets, RegionTelemetry, TargetsAck } from "../../core/ports.js";

export interface RegionService {
  readonly region: RegionName;
  /** The region's telemetry now; `seq` increases per call. */
  snapshot(): RegionTelemetry;
  /**
   * One request in push form (core/push.ts; Gateway.open): its events go to `sink` as the engine delivers them, a
   * refusal before the first event (a TidegateError) to `sink.fail`; `streamOf` makes a stream of it.
   */
  open(req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow;
  /** Stores targets (latest decisionId wins) and acknowledges them; throws invalid_request for another region. */
  acceptTargets(targets: RegionTargets): TargetsAck;
  /** What the region runs (admin listing). */
  listing(): RegionInstances;
  /**
   * Optional: calls `cb` whenever an instance is added or removed or changes state (what serves changed), so a
   * telemetry stream can send a snapshot at once instead of at its next tick. Returns the unsubscribe.
   */
  onChange?(cb: () => void): () => void;
}

/** Telemetry period of both links unless configured (DESIGN: at least once a second). */
export const DEFAULT_TELEMETRY_INTERVAL_MS = 1000;
