/**
 * The replays' RegionLink: the region's in-process link (region/link/in-process-link.ts: telemetry on the replay's
 * clock, targets, listing) whose callback shape (`submit`) enters the region's gateway by its own callback form
 * (`Gateway.submit`: the same route and in-flight books as `Gateway.generate`, engines on the same clock) —
 * synchronously, with counts and no text, so ten million requests a week cost no promise each. A gateway with no
 * serving instance of the model refuses at once (no_region_available), so the router's walk tries the next region.
 * In the "stream" shape `submit` is the in-process link's own (the region's stream read to its end, as over any
 * live link: sim/week/two-shapes.test.ts compares both).
 */
import { TidegateError } from "../../core/errors.js";
import type { EngineEvent, GenerateRequest, LinkCallbacks, RegionInstances, RegionLink, RegionTargets, RegionTelemetry, RequestCallbacks, TargetsAck, Unsubscribe } from "../../core/ports.js";
import type { Gateway } from "../../region/gateway/gateway.js";
import type { InProcessRegionLink } from "../../region/link/in-process-link.js";

/** How `submit` reaches the region: the gateway's callback form (default) or the link's stream. */
export type SubmitShape = "callbacks" | "stream";

/** One request's callbacks with the link's `onDone` observer in front (only when one is set). */
class Observed implements LinkCallbacks {
  constructor(
    private readonly req: GenerateRequest,
    private readonly inner: LinkCallbacks,
    private readonly observer: (req: GenerateRequest, atMs: number) => void,
  ) {}
  onFirstToken(atMs: number): void {
    this.inner.onFirstToken?.(atMs);
  }
  onToken(text: string, tokens: number): void {
    this.inner.onToken?.(text, tokens);
  }
  onFinish(...a: Parameters<NonNullable<LinkCallbacks["onFinish"]>>): void {
    this.inner.onFinish?.(...a);
  }
  onDone(atMs: number, generated: number): void {
    this.observer(this.req, atMs);
    this.inner.onDone?.(atMs, generated);
  }
  onError(atMs: number, err: unknown): void {
    this.inner.onError?.(atMs, err);
  }
}

/**
 * One request's callbacks that end at the first of: the region's onDone / onError, or `signal` aborting (reported as
 * onError with its reason; the gateway's callback form cannot be cancelled, so what the region reports later is
 * dropped).
 */
class Abortable implements LinkCallbacks {
  private over = false;
  private readonly onAbort = () => this.onError(this.now(), this.signal.reason);

  constructor(
    private readonly inner: LinkCallbacks,
    private readonly signal: AbortSignal,
    private readonly now: () => number,
  ) {
    signal.addEventListener("abort", this.onAbort, { once: true });
  }
  onFirstToken(atMs: number): void {
    if (!this.over) this.inner.onFirstToken?.(atMs);
  }
  onDone(atMs: number, generated: number): void {
    if (this.end()) this.inner.onDone?.(atMs, generated);
  }
  onError(_atMs: number, err: unknown): void {
    if (this.end()) this.inner.onError?.(this.now(), err);
  }
  private end(): boolean {
    if (this.over) return false;
    this.over = true;
    this.signal.removeEventListener("abort", this.onAbort);
    return true;
  }
}

/** See the file comment. */
export class CallbackLink implements RegionLink {
  readonly region: string;
  /** Told of every batch request (GenerateRequest.batch) this link carried that finished (the week replay's books). */
  onDone: ((req: GenerateRequest, atMs: number) => void) | undefined;

  constructor(
    private readonly inner: InProcessRegionLink,
    private readonly gateway: Pick<Gateway, "submit">,
    private readonly shape: SubmitShape = "callbacks",
    /** The region's clock (ms), for the time of an abort's onError. */
    private readonly now: () => number = Date.now,
  ) {
    this.region = inner.region;
  }

  subscribe(onTelemetry: (t: RegionTelemetry) => void): Unsubscribe {
    return this.inner.subscribe(onTelemetry);
  }

  dispatch(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    return this.inner.dispatch(req, signal);
  }

  /**
   * See the file comment. In the callbacks shape an aborted `signal` ends the request for the caller at once
   * (onError; the gateway's callback form cannot be cancelled, and the region's later report is dropped — the
   * `onDone` observer still hears it).
   */
  submit(req: GenerateRequest, callbacks: LinkCallbacks, signal?: AbortSignal): void {
    if (this.shape === "stream") return this.inner.submit(req, this.observed(req, callbacks), signal);
    if (signal?.aborted === true) return callbacks.onError?.(this.now(), signal.reason);
    const cb = this.observed(req, signal === undefined ? callbacks : new Abortable(callbacks, signal, this.now));
    if (this.gateway.submit(req, cb as RequestCallbacks) === undefined) throw new TidegateError("no_region_available", `no serving instance of ${req.model} in region ${this.region}`);
  }

  /** `callbacks` with the `onDone` observer in front, for a batch request while one is set. */
  private observed(req: GenerateRequest, callbacks: LinkCallbacks): LinkCallbacks {
    return this.onDone === undefined || req.batch !== true ? callbacks : new Observed(req, callbacks, this.onDone);
  }

  sendTargets(targets: RegionTargets): Promise<TargetsAck> {
    return this.inner.sendTargets(targets);
  }

  instances(): Promise<RegionInstances> {
    return this.inner.instances();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
