/**
 * The in-process RegionLink adapter: the global tier and a region in one object graph (`tidegate dev`, replay).
 * Telemetry is delivered on the injected Clock — once right after the first subscription (a zero-delay timer, never
 * synchronously inside `subscribe`) and then every `telemetryIntervalMs` — one snapshot per tick shared by all
 * subscribers. `dispatch` is the region's own generate, `submit` the same stream reported through callbacks
 * (stream-callbacks.ts); `sendTargets` its acceptTargets. No copies, no I/O.
 */
import type { Clock, Timer } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { silentLogger, type Logger } from "../../core/log.js";
import type { EngineEvent, GenerateRequest, LinkCallbacks, RegionInstances, RegionLink, RegionTargets, RegionTelemetry, TargetsAck, Unsubscribe } from "../../core/ports.js";
import { DEFAULT_TELEMETRY_INTERVAL_MS, type RegionService } from "./service.js";
import { callbackSink } from "./stream-callbacks.js";
import { openReportingLater, refused, streamOf, type EventSink, type Flow } from "../../core/push.js";

export interface InProcessLinkOptions {
  clock: Clock;
  /** Telemetry period (default 1000 ms; > 0). */
  telemetryIntervalMs?: number;
  /** Where a throwing telemetry callback is reported (it does not stop the other subscribers). */
  log?: Logger;
}

/** A RegionLink that calls a RegionService directly. */
export class InProcessRegionLink implements RegionLink {
  readonly region: string;
  private readonly clock: Clock;
  private readonly intervalMs: number;
  private readonly subscribers = new Set<(t: RegionTelemetry) => void>();
  private ticker: Timer | undefined;
  private closed = false;
  private readonly log: Logger;

  constructor(
    private readonly service: RegionService,
    opts: InProcessLinkOptions,
  ) {
    this.region = service.region;
    this.clock = opts.clock;
    this.intervalMs = opts.telemetryIntervalMs ?? DEFAULT_TELEMETRY_INTERVAL_MS;
    this.log = opts.log ?? silentLogger;
    if (!(this.intervalMs > 0)) throw new RangeError(`telemetryIntervalMs must be > 0, got ${this.intervalMs}`);
  }

  /** Delivers telemetry to `onTelemetry` until unsubscribed or closed. A throwing callback does not stop others. */
  subscribe(onTelemetry: (t: RegionTelemetry) => void): Unsubscribe {
    if (this.closed) throw new TidegateError("upstream_error", `link to region ${this.region} is closed`);
    this.subscribers.add(onTelemetry);
    const first = this.clock.after(0, () => {
      if (this.subscribers.has(onTelemetry)) this.deliver(onTelemetry, this.service.snapshot());
    });
    if (this.ticker === undefined) this.ticker = this.clock.every(this.intervalMs, () => this.tick());
    return () => {
      first.cancel();
      this.subscribers.delete(onTelemetry);
      if (this.subscribers.size === 0) this.stopTicker();
    };
  }

  /** The region's push path as a stream (core/push.ts streamOf); on a closed link, a stream that fails with upstream_error. */
  dispatch(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    return streamOf((sink, s) => this.open(req, sink, s), signal);
  }

  /** The region's push path itself (RegionService.open); on a closed link, the sink fails with upstream_error. */
  open(req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow {
    if (this.closed) return refused(sink, new TidegateError("upstream_error", `link to region ${this.region} is closed`));
    return this.service.open(req, sink, signal);
  }

  /** `dispatch` reported through callbacks (text and finish included), pushed straight from the region; on a closed link, onError. */
  submit(req: GenerateRequest, callbacks: LinkCallbacks, signal?: AbortSignal): void {
    const sink = callbackSink(() => this.clock.now(), callbacks);
    if (this.closed) {
      queueMicrotask(() => sink.fail(new TidegateError("upstream_error", `link to region ${this.region} is closed`)));
      return;
    }
    // The request is routed in this call; what it reports comes after the call returns (a refusal known at once too,
    // as a stream's first step reports it), so the caller has its answer before any callback.
    openReportingLater((s) => this.service.open(req, s, signal), sink);
  }

  async instances(): Promise<RegionInstances> {
    if (this.closed) throw new TidegateError("upstream_error", `link to region ${this.region} is closed`);
    return this.service.listing();
  }

  async sendTargets(targets: RegionTargets): Promise<TargetsAck> {
    if (this.closed) throw new TidegateError("upstream_error", `link to region ${this.region} is closed`);
    return this.service.acceptTargets(targets);
  }

  /**
   * Delivers a snapshot to every subscriber now, outside the ticker: `tidegate dev` calls it once its regions have
   * deployed, so the router does not hold the snapshot taken before any instance served for up to an interval.
   */
  publishNow(): void {
    if (!this.closed) this.tick();
  }

  /** Stops telemetry; later calls fail with upstream_error. Idempotent. Does not close the region itself. */
  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
    this.stopTicker();
  }

  private tick(): void {
    if (this.subscribers.size === 0) return;
    const t = this.service.snapshot();
    for (const cb of [...this.subscribers]) this.deliver(cb, t);
  }

  private deliver(cb: (t: RegionTelemetry) => void, t: RegionTelemetry): void {
    try {
      cb(t);
    } catch (err) {
      this.log.error("telemetry subscriber failed", { region: this.region, err });
    }
  }

  private stopTicker(): void {
    this.ticker?.cancel();
    this.ticker = undefined;
  }
}

