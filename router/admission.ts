/**
 * Overload shedding (issue 15, item 4): in-flight limits checked before a request is dispatched, so that when
 * every region is at capacity the router answers 429 with `Retry-After` instead of queueing without bound.
 *
 * Two limits: the router-wide `router.maxInflight`, and per tenant `router.tenantMaxInflight` (an API key's own
 * `maxInflight` overrides it for that key's tenant). A request holds one slot of each from admission until its
 * response ends (success, error or client abort). Pure counting, no timers: replay can use it too.
 */
import { TidegateError } from "../core/errors.js";
import type { ConcurrencyShed } from "./concurrency.js";

/**
 * Which limit refused a request: these two, an adaptive one (concurrency.ts), or `slo`: no region that may serve it
 * predicts a first token within its model's TTFT SLO (spill.ts, router.spill).
 */
export type ShedLimit = "tenant" | "global" | ConcurrencyShed | "slo";

/** The error a shed request gets: 429 `rate_limited`, with the limit and the retry hint in the message. */
export class ShedError extends TidegateError {
  constructor(
    readonly limit: ShedLimit,
    readonly retryAfterS: number,
    message: string,
  ) {
    super("rate_limited", message);
  }
}

export interface AdmissionOptions {
  /** Requests in flight through the router at once (≥ 1). */
  maxInflight: number;
  /** Default per-tenant limit (≥ 1). */
  tenantMaxInflight: number;
  /** Seconds to put in Retry-After (≥ 1). */
  retryAfterS: number;
}

export class Admission {
  private total = 0;
  private readonly perTenant = new Map<string, number>();

  constructor(private readonly opts: AdmissionOptions) {
    for (const [k, v] of Object.entries(opts)) if (!(Number.isInteger(v) && v >= 1)) throw new RangeError(`admission ${k} must be an integer ≥ 1, got ${v}`);
  }

  /** Requests in flight now (all tenants). */
  get inflight(): number {
    return this.total;
  }

  /** In flight now for `tenant`. */
  tenantInflight(tenant: string): number {
    return this.perTenant.get(tenant) ?? 0;
  }

  /**
   * Takes one slot for `tenant` (limit `tenantLimit` or the default) and returns its release (idempotent).
   * Throws ShedError when the tenant's or the router's limit is reached; nothing is taken then.
   */
  admit(tenant: string, tenantLimit?: number): () => void {
    const limit = tenantLimit ?? this.opts.tenantMaxInflight;
    const mine = this.perTenant.get(tenant) ?? 0;
    if (mine >= limit) {
      throw new ShedError("tenant", this.opts.retryAfterS, `tenant ${JSON.stringify(tenant)} has ${mine} requests in flight, its limit; retry after ${this.opts.retryAfterS} s`);
    }
    if (this.total >= this.opts.maxInflight) {
      throw new ShedError("global", this.opts.retryAfterS, `the router is at capacity (${this.total} requests in flight); retry after ${this.opts.retryAfterS} s`);
    }
    this.total++;
    this.perTenant.set(tenant, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const n = (this.perTenant.get(tenant) ?? 1) - 1;
      if (n <= 0) this.perTenant.delete(tenant);
      else this.perTenant.set(tenant, n);
    };
  }
}
