/**
 * A scripted `Engine` for tests of the gateway, the links and the router: settable stats, a fixed number of
 * synthetic tokens per request with an optional per-token delay on a Clock, and scripted failures. It records
 * every request it saw and every cancellation. Not a performance model (that is engines/sim).
 */
import type { Clock } from "../../core/clock.js";
import { TidegateError } from "../../core/errors.js";
import { makeUsage, syntheticToken } from "../../core/openai.js";
import type { ModelName } from "../../core/models.js";
import type { Engine, EngineEvent, EngineStats, GenerateRequest } from "../../core/ports.js";

export interface FakeEngineOptions {
  instanceId: string;
  model: ModelName;
  /** Stats returned by stats() (mutable later through `stats`). */
  stats?: Partial<EngineStats>;
  /** Output tokens per request (default: the request's maxTokens). */
  outputTokens?: number;
  /** Delay before each token (default 0: tokens are yielded back to back). Needs `clock` when > 0. */
  tokenDelayMs?: number;
  clock?: Clock;
}

/** A fake engine. `failNext` makes the next requests fail: "before" the first event or "after" it. */
export class FakeEngine implements Engine {
  readonly instanceId: string;
  readonly model: ModelName;
  current: EngineStats;
  /** Every request received, in order. */
  readonly requests: GenerateRequest[] = [];
  /** Ids of requests whose signal aborted while generating. */
  readonly cancelled: string[] = [];
  /** Requests generating now. */
  active = 0;
  /** Failures to inject into the next requests, consumed in order. */
  failNext: ("before" | "after")[] = [];
  private closed = false;

  constructor(private readonly opts: FakeEngineOptions) {
    this.instanceId = opts.instanceId;
    this.model = opts.model;
    this.current = { kvBytesUsed: 0, kvBytesCapacity: 1e9, running: 0, waiting: 0, remainingTokens: 0, generatedTokensTotal: 0, ...opts.stats };
  }

  /** Streams `outputTokens` synthetic tokens then `done`; honours `signal` between tokens. */
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<EngineEvent, void, undefined> {
    if (this.closed) throw new TidegateError("upstream_error", `engine ${this.instanceId} is closed`);
    this.requests.push(req);
    const failure = this.failNext.shift();
    if (failure === "before") throw new TidegateError("upstream_error", `engine ${this.instanceId}: injected failure before the first token`);
    const n = this.opts.outputTokens ?? req.maxTokens;
    const delayMs = this.opts.tokenDelayMs ?? 0;
    const seed = req.id.length * 131 + n;
    this.active++;
    let completed = false;
    try {
      for (let i = 0; i < n; i++) {
        if (delayMs > 0) {
          if (this.opts.clock === undefined) throw new RangeError("FakeEngine: tokenDelayMs > 0 needs a clock");
          await this.opts.clock.sleep(delayMs, signal);
        }
        if (signal?.aborted) throw signal.reason;
        if (failure === "after" && i === 1) throw new TidegateError("upstream_error", `engine ${this.instanceId}: injected failure after the first token`);
        this.current.generatedTokensTotal++;
        yield { type: "token", text: syntheticToken(seed, i), tokens: 1 };
      }
      completed = true;
      yield { type: "done", finishReason: n >= req.maxTokens ? "length" : "stop", usage: makeUsage(req.promptTokens, n) };
    } finally {
      this.active--;
      if (!completed && signal?.aborted === true) this.cancelled.push(req.id);
    }
  }

  stats(): EngineStats {
    return { ...this.current };
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
