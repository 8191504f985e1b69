/** The `router` section: the global router's listener, keys, limits and region-selection threshold. */
import type { ModelName, RegionName } from "../models.js";
import { ObjectReader, ValidationError } from "../validate.js";

export interface RouterConfig {
  host: string;
  port: number;
  bodyLimitBytes: number;
  /** SageServe §6.2: first region below this effective memory utilization wins. */
  memoryThreshold: number;
  /**
   * SLO-aware spill (issue 46 item 5; router/spill.ts): a region whose predicted TTFT for a request exceeds the
   * model's TTFT SLO is left for the nearest other allowed region under the memory threshold that predicts within it,
   * and a request no allowed region predicts within the SLO for is shed with 429. Off by default (`false`): in the
   * week replay the predictions shed 16–65% of a burst's requests that were served before (sim/week/two-shapes.test.ts
   * prints it with spill on), so the predictor is not yet trusted as a default; config accepts `true`/`"on"` and
   * `false`/`"off"`.
   */
  spill: boolean;
  /** Bearer keys that may call the API; empty means open. */
  /**
   * `region`: the key's home region (routed there first; a request's x-tidegate-region header may name another).
   * `regions`: where the key's requests may be served at all (data residency); absent = anywhere.
   */
  apiKeys: { key: string; tenant: string; region?: RegionName; regions?: RegionName[]; models?: ModelName[]; maxInflight?: number; weight?: number }[];
  /** Bearer keys for admin endpoints (/plans, regions, scaling); also sign in at /login. */
  adminKeys: string[];
  /** Read-only keys for /plans (the `planner` role: read, not approve or plan now); also sign in at /login. */
  plannerKeys: string[];
  /** Telemetry older than this is treated as missing (the region is not chosen; 1500 ms by default: three missed 500 ms reports). */
  telemetryStaleMs: number;
  /**
   * The ceiling on silence from a region (10 000 ms by default): a wait for the first event, or a running stream, with
   * nothing for this long ends. A running stream ends sooner when its region stops reporting, or after its model's own
   * stall limit (router/watchdog.ts, router/README.md "When a region goes dark").
   */
  streamStallMs: number;
  /** Requests in flight through the router at once; beyond it, 429 with Retry-After (issue 15 item 4). */
  maxInflight: number;
  /** Requests one tenant may have in flight at once (an API key's `maxInflight` overrides it); beyond it, 429. */
  tenantMaxInflight: number;
  /** Seconds a shed request is told to wait (Retry-After). */
  retryAfterS: number;
  /** Adaptive concurrency limits per (region, model) and tenants' fair shares (router/concurrency.ts). */
  concurrency: ConcurrencyConfig;
  /**
   * The most V8 may grow the `tidegate global` process's young generation to (MiB, both semi-spaces; 0: V8's own
   * sizing, up to 32 MiB in Node 20): core/young-generation.ts.
   */
  youngGenerationMiB: number;
}

/** `router.concurrency` (issue 32 item 1; router/concurrency.ts says how each is used). */
export interface ConcurrencyConfig {
  /** false: only the fixed `maxInflight` and tenant limits shed. */
  adaptive: boolean;
  /** Each (region, model)'s limit before any measurement; absent: `maxInflight` (nothing shed until a queue is seen). */
  initialLimit?: number;
  minLimit: number;
  /** Queueing delay (ms) above which a limit is cut; absent: `toleranceFraction` of the model's TTFT SLO's slack, at least 10 ms. */
  toleranceMs?: number;
  /**
   * Without `toleranceMs`: the queueing delay allowed, as a fraction of what the model's TTFT SLO (`slo.ttftMs`) leaves
   * after the unloaded TTFT (baseline + prefill); of the unloaded TTFT itself when that already exceeds the SLO.
   */
  toleranceFraction: number;
  /** The factor of a cut. */
  backoff: number;
  /** Above this fraction of a model's summed limits, tenants are held to their weighted shares. */
  fairAbove: number;
  /** How long a request within its tenant's share may wait for a slot when every region is full (ms; 0: shed at once). */
  queueMs: number;
}

/** Reads the `router` object; API keys may name only configured regions (`regionNames`) and models (`modelNames`). */
export function parseRouter(rr: ObjectReader, regionNames: ReadonlySet<string>, modelNames: ReadonlySet<string>): RouterConfig {
  const router: RouterConfig = {
    host: rr.string("host", "127.0.0.1"),
    port: rr.number("port", 8080, { integer: true, min: 0, max: 65535 }),
    bodyLimitBytes: rr.number("bodyLimitBytes", 4 * 1024 * 1024, { integer: true, min: 1024 }),
    memoryThreshold: rr.number("memoryThreshold", 0.7, { gt: 0, max: 1 }),
    spill: parseSpill(rr),
    apiKeys: rr.array("apiKeys", (v, path) => parseApiKey(v, path, regionNames, modelNames), []),
    adminKeys: rr.array("adminKeys", (v, path) => {
      if (typeof v !== "string" || v.length < 8) throw new ValidationError(path, "admin keys must be strings of at least 8 characters");
      return v;
    }, []),
    plannerKeys: rr.array("plannerKeys", (v, path) => {
      if (typeof v !== "string" || v.length < 8) throw new ValidationError(path, "planner keys must be strings of at least 8 characters");
      return v;
    }, []),
    telemetryStaleMs: rr.number("telemetryStaleMs", 1500, { gt: 0 }),
    streamStallMs: rr.number("streamStallMs", 10_000, { integer: true, min: 1 }),
    maxInflight: rr.number("maxInflight", 4096, { integer: true, min: 1 }),
    tenantMaxInflight: rr.number("tenantMaxInflight", 1024, { integer: true, min: 1 }),
    retryAfterS: rr.number("retryAfterS", 1, { integer: true, min: 1 }),
    concurrency: parseConcurrency(rr),
    youngGenerationMiB: rr.number("youngGenerationMiB", 8, { min: 0, max: 1024 }),
  };
  rr.done();
  return router;
}

/** `router.spill`: true / "on", or false / "off" (the default); anything else is rejected, naming the path. */
function parseSpill(rr: ObjectReader): boolean {
  const v = rr.raw("spill");
  if (v === true || v === "on") return true;
  if (v === undefined || v === false || v === "off") return false;
  return rr.fail("spill", `must be true, false, "on" or "off", got ${JSON.stringify(v)}`);
}

function parseConcurrency(rr: ObjectReader): ConcurrencyConfig {
  const c = rr.object("concurrency");
  const toleranceMs = c.optionalNumber("toleranceMs", { gt: 0 });
  const initialLimit = c.optionalNumber("initialLimit", { integer: true, min: 1 });
  const out: ConcurrencyConfig = {
    adaptive: c.boolean("adaptive", true),
    ...(initialLimit === undefined ? {} : { initialLimit }),
    minLimit: c.number("minLimit", 2, { integer: true, min: 1 }),
    ...(toleranceMs === undefined ? {} : { toleranceMs }),
    toleranceFraction: c.number("toleranceFraction", 0.5, { gt: 0, max: 10 }),
    backoff: c.number("backoff", 0.9, { gt: 0, max: 0.99 }),
    fairAbove: c.number("fairAbove", 0.9, { gt: 0, max: 1 }),
    queueMs: c.number("queueMs", 10, { min: 0, max: 60_000 }),
  };
  if (out.initialLimit !== undefined && out.minLimit > out.initialLimit) c.fail("minLimit", `must not exceed initialLimit (${out.initialLimit}), got ${out.minLimit}`);
  c.done();
  return out;
}

function parseApiKey(v: unknown, path: string, regionNames: ReadonlySet<string>, modelNames: ReadonlySet<string>): RouterConfig["apiKeys"][number] {
  const k = new ObjectReader(v, path);
  const key = k.string("key");
  const tenant = k.string("tenant");
  const region = k.optionalString("region");
  const keyMaxInflight = k.optionalNumber("maxInflight", { integer: true, min: 1 });
  const weight = k.optionalNumber("weight", { gt: 0 });
  if (region !== undefined && !regionNames.has(region)) k.fail("region", `unknown region ${JSON.stringify(region)}`);
  const keyModels = k.has("models") ? k.array("models", (mv, mp) => {
    if (typeof mv !== "string" || !modelNames.has(mv)) throw new ValidationError(mp, `unknown model ${JSON.stringify(mv)}`);
    return mv;
  }) : (k.allow("models"), undefined);
  const keyRegions = k.has("regions") ? k.array("regions", (rv, rp) => {
    if (typeof rv !== "string" || !regionNames.has(rv)) throw new ValidationError(rp, `unknown region ${JSON.stringify(rv)}`);
    return rv;
  }, undefined, { minLength: 1 }) : (k.allow("regions"), undefined);
  if (keyRegions !== undefined && region !== undefined && !keyRegions.includes(region)) k.fail("region", `home region ${JSON.stringify(region)} is not among the key's regions (${keyRegions.join(", ")})`);
  k.done();
  return { key, tenant, ...(region === undefined ? {} : { region }), ...(keyRegions === undefined ? {} : { regions: keyRegions }), ...(keyModels === undefined ? {} : { models: keyModels }), ...(keyMaxInflight === undefined ? {} : { maxInflight: keyMaxInflight }), ...(weight === undefined ? {} : { weight }) };
}
