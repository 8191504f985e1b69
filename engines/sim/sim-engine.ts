/**
 * The `Engine` port (core/ports.ts) over the simulated core: `generate()` streams token events paced on the
 * core's Clock (WallClock live, VirtualClock in tests), with deterministic synthetic text (core/openai.ts
 * syntheticToken, seeded by the request id) so every hop emits identical bytes.
 */
import type { EngineSettings } from "../../core/engine-settings.js";
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { makeUsage, syntheticToken } from "../../core/openai.js";
import type { Engine, EngineEvent, EngineStats, GenerateRequest, RequestCallbacks } from "../../core/ports.js";
import type { Solver } from "../../core/solver.js";
import { LayerwiseHost } from "./layerwise/layerwise-host.js";
import { getProfile } from "../../core/perf/model.js";
import { SimEngineCore, type SimCoreOptions, type SimSubmit } from "./core.js";
import { blockHashesOfBody } from "../../core/prefix.js";
import type { KvEventSource } from "../../core/ports.js";
import type { KvFabric } from "./kv-fabric.js";

/**
 * Host memory for the KV tier under the prefix cache (prefix-cache.ts), per GPU of an instance, GiB: half of an H100
 * node's host memory per GPU (a DGX H100 has 2 TiB for 8 GPUs = 256 GiB each; the other half stays for the OS, the
 * engine, and weights cached in host memory for loading). 256 GiB per 2-GPU instance: 2.1 M tokens of llama3.1-8b KV
 * (128 KiB per token), twice its GPU KV. (vLLM production-stack's example sets 20 GB, LMCache's own default is 5 GB:
 * sized to the pod, not the node.)
 */
export const DEFAULT_HOST_KV_GIB_PER_GPU = 128;
/** The core's settings a SimEngine passes through: every SimCoreOptions field but its profile and clock (documented once, there). */
type CoreSettings = Omit<SimCoreOptions, "profile" | "clock">;

/**
 * A SimEngine: its instance, the core's settings (SimCoreOptions; `prefixCache` here defaults to a host KV tier of
 * DEFAULT_HOST_KV_GIB_PER_GPU × tp, `hostKvCacheGiB` 0 = none), how it streams and its zigzag solver.
 */
export interface SimEngineOptions extends CoreSettings {
  instanceId: string;
  model: string;
  gpu: string;
  /** GPUs per instance (tensor parallelism); must have a profile (perf/model.ts getProfile). */
  tp: number;
  clock: Clock;
  /**
   * "per-token" (default, live): one `token` event per token at its time, with its synthetic text. "coalesced"
   * (replay): one `token` event for the first token at its time, then one carrying every other token (text "")
   * at completion, then `done` — the same times and usage with three events per request instead of one per token.
   */
  events?: "per-token" | "coalesced";
  /** HiGHS for a live zigzag pairing (Engine.layerwise), created on first use; without it only best-effort pairs. */
  solver?: () => Promise<Solver>;
  /**
   * Prefill/decode disaggregation in process (Engine.role; region/gateway/pd.ts drives it): "prefill" serves only
   * prefills for a remote decode, "decode" decodes from a remote prefill or serves a request whole, "both" (default)
   * serves whole requests and either step. A role or a step needs `kvFabric`, which times the KV's transfer.
   */
  role?: "prefill" | "decode" | "both";
  kvFabric?: KvFabric;
}

/**
 * The core settings an EngineSettings (core/engine-settings.ts) gives: the one mapping from the schema to the
 * simulator. A schema field is the core option of the same name, except the prefix cache's two (one object in the
 * core) and `role` (the HTTP face's, engine-sim's http.ts); so a new core setting needs only its schema entry and its
 * SimCoreOptions field.
 */
export function coreSettingsOf(s: EngineSettings): CoreSettings {
  const { prefixBlockTokens, hostKvCacheGiB, role: _role, ...same } = s;
  const cache = prefixBlockTokens === 0 ? false : prefixBlockTokens === undefined && hostKvCacheGiB === undefined ? undefined : {
    ...(prefixBlockTokens === undefined ? {} : { blockTokens: prefixBlockTokens }),
    ...(hostKvCacheGiB === undefined ? {} : { hostKvCacheGiB }),
  };
  return { ...same, ...(cache === undefined ? {} : { prefixCache: cache }) };
}

/** 32-bit FNV-1a of a request id: the seed of its synthetic tokens. */
export function seedOf(id: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export class SimEngine implements Engine {
  readonly instanceId: string;
  readonly model: string;
  readonly core: SimEngineCore;
  /** Live serve-while-loading pairings (Engine.layerwise; layerwise/layerwise-host.ts). */
  readonly layerwise: LayerwiseHost;
  role?: "prefill" | "decode" | "both";
  private readonly clock: Clock;
  private readonly coalesced: boolean;
  private readonly kvFabric: KvFabric | undefined;
  private readonly tp: number;

  constructor(opts: SimEngineOptions) {
    // The instance's own fields; everything else is the core's settings, passed through.
    const { instanceId, model, gpu, tp, clock, events, solver, prefixCache, role, kvFabric, ...settings } = opts;
    this.instanceId = instanceId;
    this.model = model;
    this.clock = clock;
    this.tp = tp;
    this.kvFabric = kvFabric;
    if (role !== undefined && role !== "both" && kvFabric === undefined) throw new TidegateError("invalid_config", `instance ${instanceId} has the role ${role}, which needs a KV fabric to move its KV`, { param: "role" });
    if (role !== undefined) this.role = role;
    this.coalesced = events === "coalesced";
    // The host KV tier by default: DEFAULT_HOST_KV_GIB_PER_GPU per GPU of the instance (prefixCache.hostKvCacheGiB: 0 = off).
    const coreOpts: SimCoreOptions = {
      ...settings,
      profile: getProfile(model, gpu, tp),
      clock,
      prefixCache: prefixCache === false ? false : { ...prefixCache, hostKvCacheGiB: prefixCache?.hostKvCacheGiB ?? DEFAULT_HOST_KV_GIB_PER_GPU * tp },
    };
    this.core = new SimEngineCore(coreOpts);
    this.layerwise = new LayerwiseHost({ core: this.core, clock, ...(solver === undefined ? {} : { solver }) });
  }

  /** Engine.switchRole: from the next request on, this instance takes `role`'s steps (it has a KV fabric: it has a role). */
  async switchRole(role: "prefill" | "decode"): Promise<void> {
    if (this.kvFabric === undefined) throw new TidegateError("conflict", `instance ${this.instanceId} has no KV fabric: it cannot take the role ${role}`);
    this.role = role;
  }

  /** The callback form of `generate` (Engine.submit): the core's own events, no stream and no per-token work. */
  submit(req: GenerateRequest, callbacks: RequestCallbacks): void {
    if (req.model !== this.model) throw new TidegateError("model_not_found", `this engine serves ${this.model}, not ${req.model}`, { param: "model" });
    if (this.stepOf(req) !== "whole") throw new TidegateError("invalid_request", `instance ${this.instanceId}: a prefill/decode step (kv_transfer_params) is served by generate, not the callback form`, { param: "kv_transfer_params" });
    this.core.submit(this.simSubmit(req), callbacks);
  }

  /**
   * What `req` asks of this instance (GenerateRequest.kvTransfer): the whole request, a prefill for a remote decode,
   * or a decode from a remote prefill; throws invalid_request where the role refuses it (as engine-sim's HTTP face).
   */
  private stepOf(req: GenerateRequest): "whole" | "prefill" | "decode" {
    const t = req.kvTransfer;
    const step = t === undefined ? "whole" : "remoteDecode" in t ? "prefill" : "decode";
    const role = this.role ?? "both";
    if (role === "prefill" && step !== "prefill") throw new TidegateError("invalid_request", `instance ${this.instanceId} of ${this.model} prefills for remote decode only (role prefill): send kv_transfer_params {"do_remote_decode": true}`, { param: "kv_transfer_params" });
    if (role === "decode" && step === "prefill") throw new TidegateError("invalid_request", `instance ${this.instanceId} of ${this.model} is a decode instance (role decode): it decodes from a remote prefill or serves a request whole`, { param: "kv_transfer_params" });
    if (step !== "whole" && this.kvFabric === undefined) throw new TidegateError("invalid_request", `instance ${this.instanceId} of ${this.model} has no KV fabric: it serves whole requests only`, { param: "kv_transfer_params" });
    return step;
  }

  /**
   * Streams one generation: `token` events (one token each) at their simulated times, then `done` with usage
   * (finish "length": synthetic output always runs to max tokens). Aborting `signal` cancels the request in the
   * core (frees KV) and the iterable throws the signal's reason. Throws invalid_request when the request cannot
   * fit the instance, model_not_found for another model.
   */
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent> {
    if (req.model !== this.model) throw new TidegateError("model_not_found", `this engine serves ${this.model}, not ${req.model}`, { param: "model" });
    const step = this.stepOf(req);
    signal?.throwIfAborted();
    // A decode from a remote prefill pulls the prompt's KV first (kv-fabric.ts): its time is part of this TTFT.
    if (step === "decode") {
      const params = (req.kvTransfer as { params: Readonly<Record<string, unknown>> }).params;
      const pulled = await this.kvFabric!.pull(this.instanceId, this.model, this.tp, params, req.promptTokens, signal);
      req = { ...req, remotePrefillTokens: pulled.remoteTokens };
    }
    let wake: (() => void) | undefined;
    const notify = () => wake?.();
    const handle = this.core.submit(
      this.simSubmit(req),
      // A preempted request waits without a next token time: its resumption wakes the loop.
      { onFirstToken: notify, onDone: notify, onCancelled: notify, onResumed: notify },
    );
    const seed = seedOf(req.id);
    let emitted = 0;
    const onAbort = () => {
      handle.cancel();
      notify();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      for (;;) {
        if (signal?.aborted) throw signal.reason ?? new TidegateError("cancelled", "request cancelled");
        const generated = handle.generatedNow();
        if (this.coalesced && generated > emitted && (emitted === 0 || handle.finished)) {
          const n = emitted === 0 ? 1 : generated - emitted;
          emitted += n;
          yield { type: "token", text: "", tokens: n };
          continue;
        }
        while (!this.coalesced && emitted < generated) {
          yield { type: "token", text: syntheticToken(seed, emitted), tokens: 1 };
          emitted++;
        }
        // Tokens may have been generated while the consumer held a yield above: emit them before `done`.
        if (handle.finished && handle.generatedNow() <= emitted) {
          if (signal?.aborted) throw signal.reason ?? new TidegateError("cancelled", "request cancelled");
          const usage = makeUsage(req.promptTokens, emitted);
          // A prefill for a remote decode answers where its KV is held (vLLM's kv_transfer_params).
          if (step === "prefill") yield { type: "done", finishReason: "length", usage, kvTransferParams: { ...this.kvFabric!.offer(this.instanceId, this.model, this.tp, req.id, req.promptTokens) } };
          else yield { type: "done", finishReason: "length", usage };
          return;
        }
        // Coalesced: after the first token, sleep until the core reports completion (no per-token timers).
        const nextMs = this.coalesced && emitted > 0 ? undefined : handle.nextTokenAtMs();
        // nextTokenAtMs() may have fired overdue phase ends (a late timer): the request may have moved on, even
        // finished, with its notification spent while nobody waited. Re-check before sleeping. Coalesced, after the
        // first token only the end matters (the tokens in between go with it; a resumption after a preemption wakes
        // the loop early and must not spin it).
        if (handle.finished || (handle.generatedNow() > emitted && !(this.coalesced && emitted > 0))) continue;
        await new Promise<void>((resolve) => {
          const timer = nextMs === undefined ? undefined : this.clock.after(Math.max(0, nextMs - this.clock.now()), () => resolve());
          wake = () => {
            timer?.cancel();
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      if (!handle.finished) handle.cancel();
    }
  }

  stats(): EngineStats {
    return this.core.stats();
  }

  /** Serving behind blocks still arriving (a blitzscale cold start; SimEngineCore.setBlockArrivals). */
  setBlockArrivals(arrivalsMs: readonly number[] | undefined): void {
    this.core.setBlockArrivals(arrivalsMs);
  }

  /** A λScale pipeline head's activation hops per pass, 0 in local mode (SimCore.setPassOverheadMs). */
  setPassOverheadMs(ms: number): void {
    this.core.setPassOverheadMs(ms);
  }

  /**
   * The core's request: with the prompt's block hashes for the prefix cache — those the request carries (a trace's,
   * or the gateway's), else computed from its body as the router computes them (core/prefix.ts).
   */
  private simSubmit(req: GenerateRequest): SimSubmit {
    const s: SimSubmit = { id: req.id, promptTokens: req.promptTokens, maxTokens: req.maxTokens, priority: req.priority };
    if (req.remotePrefillTokens !== undefined && req.remotePrefillTokens > 0) s.remoteTokens = req.remotePrefillTokens;
    const cache = this.core.prefixCache;
    if (cache === undefined) return s;
    const hashes = req.blockHashes ?? blockHashesOfBody(req.kind, req.body, cache.blockTokens);
    if (hashes.length > 0) s.blockHashes = hashes;
    return s;
  }

  /** Subscribes to the prefix cache's KV events (vLLM kv_events); undefined when prefix caching is off. */
  get kvEvents(): KvEventSource | undefined {
    const cache = this.core.prefixCache;
    return cache === undefined ? undefined : { blockTokens: cache.blockTokens, subscribe: (l) => cache.subscribe(l), snapshot: () => cache.hashes(), hostSnapshot: () => cache.hostHashes() };
  }

  async close(): Promise<void> {
    this.layerwise.close();
    this.core.close();
  }
}
