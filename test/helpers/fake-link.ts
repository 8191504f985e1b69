/**
 * A scriptable in-memory RegionLink for router tests: emits telemetry on demand, streams synthetic tokens, and can
 * fail before the first token or after N tokens. It records every dispatch and whether its signal was aborted.
 * Test double only; the real adapters live in region/link/.
 */
import { TidegateError } from "../../core/errors.js";
import { makeUsage, syntheticToken } from "../../core/openai.js";
import { submitOverStream } from "../../region/link/stream-callbacks.js";
import type { EngineEvent, GenerateRequest, LinkCallbacks, ModelTelemetry, RegionLink, RegionTargets, RegionTelemetry, TargetsAck, Unsubscribe } from "../../core/ports.js";

/** How the fake answers a dispatch. */
export interface FakeBehavior {
  /** Throw upstream_error before any event. */
  failBeforeFirst?: boolean;
  /** Throw upstream_error after this many token events. */
  failAfterTokens?: number;
  /** Wait this long (real ms) before each event; 0 = none. */
  delayMs?: number;
  /** Send this many token events, then go silent until aborted (a frozen region: SIGSTOP, half-open TCP). */
  hangAfterTokens?: number;
}

export interface FakeDispatch {
  req: GenerateRequest;
  aborted: boolean;
  /** Token events emitted so far. */
  emitted: number;
  finished: boolean;
  /** Its stream's `finally` ran: read to the end, returned or failed (never true for one left suspended). */
  closed: boolean;
}

/** Telemetry for one model with one h100 endpoint of `instances` serving instances at `utilization`. */
export function modelTelemetry(model: string, utilization: number, instances = 2): ModelTelemetry {
  return {
    model,
    effectiveMemoryUtilization: utilization,
    tokensPerS: 0,
    running: 0,
    waiting: 0,
    instances: { provisioning: 0, loading: 0, serving: instances, draining: 0, spot: 0 },
    endpoints: [{ endpointId: `${model}/h100-80gb`, gpu: "h100-80gb", effectiveMemoryUtilization: utilization, servingInstances: instances }],
  };
}

export class FakeRegionLink implements RegionLink {
  readonly dispatches: FakeDispatch[] = [];
  behavior: FakeBehavior = {};
  private readonly listeners = new Set<(t: RegionTelemetry) => void>();
  private readonly downListeners = new Set<() => void>();
  private seq = 0;

  constructor(readonly region: string, private readonly nowMs: () => number = Date.now) {}

  /** Pushes a snapshot with utilization per model to every subscriber; returns it. */
  emitTelemetry(utilizationByModel: Record<string, number>): RegionTelemetry {
    const t: RegionTelemetry = {
      region: this.region,
      seq: ++this.seq,
      atMs: this.nowMs(),
      models: Object.entries(utilizationByModel).map(([m, u]) => modelTelemetry(m, u)),
    };
    for (const l of this.listeners) l(t);
    return t;
  }

  subscribe(onTelemetry: (t: RegionTelemetry) => void, onDown?: () => void): Unsubscribe {
    this.listeners.add(onTelemetry);
    if (onDown !== undefined) this.downListeners.add(onDown);
    return () => {
      this.listeners.delete(onTelemetry);
      if (onDown !== undefined) this.downListeners.delete(onDown);
    };
  }

  /** Tells subscribers the region is gone (as a broken telemetry stream does). */
  goDown(): void {
    for (const d of this.downListeners) d();
  }

  /** `dispatch` reported through callbacks (as the real streaming links do). */
  submit(req: GenerateRequest, callbacks: LinkCallbacks, signal?: AbortSignal): void {
    submitOverStream(this.dispatch(req, signal), this.nowMs, callbacks);
  }

  async *dispatch(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    const d: FakeDispatch = { req, aborted: false, emitted: 0, finished: false, closed: false };
    this.dispatches.push(d);
    signal?.addEventListener("abort", () => void (d.aborted = true), { once: true });
    const b = this.behavior;
    const wait = async () => {
      if ((b.delayMs ?? 0) > 0) await new Promise((r) => setTimeout(r, b.delayMs));
      if (signal?.aborted) throw new TidegateError("cancelled", "dispatch aborted");
    };
    try {
      await wait();
      if (b.failBeforeFirst) throw new TidegateError("upstream_error", `region ${this.region} failed (scripted)`);
      for (let i = 0; i < req.maxTokens; i++) {
        if (b.hangAfterTokens !== undefined && i >= b.hangAfterTokens) {
          await new Promise<void>((resolve) => (signal?.aborted ? resolve() : signal?.addEventListener("abort", () => resolve(), { once: true })));
          throw new TidegateError("cancelled", "dispatch aborted");
        }
        if (b.failAfterTokens !== undefined && i >= b.failAfterTokens) throw new TidegateError("upstream_error", `region ${this.region} failed mid-stream (scripted)`);
        yield { type: "token", text: syntheticToken(7, i), tokens: 1 };
        d.emitted++;
        await wait();
      }
      d.finished = true;
      yield { type: "done", finishReason: "length", usage: makeUsage(req.promptTokens, req.maxTokens) };
    } finally {
      d.closed = true;
    }
  }

  async instances(): Promise<import("../../core/ports.js").RegionInstances> {

    return { region: this.region, actuator: "static", instances: [], nodes: [], failures: [], actions: [] };

  }


  async sendTargets(targets: RegionTargets): Promise<TargetsAck> {
    return { region: this.region, decisionId: targets.decisionId, accepted: true };
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}
