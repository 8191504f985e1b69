/**
 * The one configuration file (JSON), validated once at start-up. Every error names the exact path
 * (`regions[1].gpus[0].count`); bad values are rejected, never replaced. Units are in the names.
 *
 * Sections belong to tiers: `models`, `regions` (fleet), `router`, `queue`, `planner`, `controller`, `engines`.
 * `DEFAULT_CONFIG` is the embedded default `tidegate dev` runs on (3 regions, 4 models, simulated engines).
 */
import { readFileSync } from "node:fs";
import { GPU_SPECS, MODEL_SPECS, type GpuType, type ModelName, type RegionName } from "./models.js";
import { ObjectReader, ValidationError, parseJson } from "./validate.js";
import { TidegateError } from "./errors.js";
import { readRedisTls, redactUrl, type RedisTlsConfig } from "./redis.js";
import { parseKeystageConfig, type KeystageConfig } from "../region/keystage/keystage-config.js";
import { parseLoadingConfig, type LoadingConfig } from "../region/liveload/liveload-config.js";

export interface ModelConfig {
  name: ModelName;
  /** GPUs one instance of this model uses, per GPU type it can run on (tensor parallelism). */
  gpusPerInstance: Record<GpuType, number>;
}

export interface EndpointConfig {
  model: ModelName;
  gpu: GpuType;
  /** Instances at start. */
  instances: number;
  minInstances: number;
  maxInstances: number;
}

export interface RegionConfig {
  name: RegionName;
  /** Hours from UTC, for local-time workloads (e.g. -5 for us-east). */
  utcOffsetH: number;
  /** Other regions in order of proximity (used after this one when a client belongs here). */
  proximity: RegionName[];
  gpus: { type: GpuType; count: number }[];
  endpoints: EndpointConfig[];
  /** Where the region process listens for the global router (gRPC), when run as its own process. */
  grpcAddress: string;
  /** This region's loading source, over `controller.loading` (region/liveload/liveload-config.ts). */
  loading?: LoadingConfig;
  /**
   * Static regions: share of the region's engines (0–100, default 50) that may be out of service for health at once;
   * beyond it an unhealthy engine keeps serving and the region logs why (region/process/engine-health.ts). 0: never.
   * Optional here only for hand-built configs; parsing always fills it.
   */
  maxEjectedPercent?: number;
}

export interface RouterConfig {
  host: string;
  port: number;
  bodyLimitBytes: number;
  /** SageServe §6.2: first region below this effective memory utilization wins. */
  memoryThreshold: number;
  /** Bearer keys that may call the API; empty means open. */
  /**
   * `region`: the key's home region (routed there first; a request's x-tidegate-region header may name another).
   * `regions`: where the key's requests may be served at all (data residency); absent = anywhere.
   */
  apiKeys: { key: string; tenant: string; region?: RegionName; regions?: RegionName[]; models?: ModelName[]; maxInflight?: number }[];
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
}

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
  promoteAfterMs: number;
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
   * `queue.journal.corrupt-N` instead of refusing to start (default false; `--recover-journal` sets it).
   */
  recoverJournal: boolean;
}

export interface PlannerConfig {
  intervalMs: number;
  advisory: boolean;
  /** Per-region cover factor α and NIW buffer factor β (DESIGN planner section). */
  alpha: number;
  beta: number;
  /**
   * Which point of each (model, region)'s peak forecast the ILP covers: "upper" (default) = the forecaster's 90%
   * upper bound, so an hour whose peak comes in above the point forecast still has planned capacity; LT-U/LT-UA
   * spend it only while utilization asks for it, and scale back in to the point forecast's count (the target's
   * floor) when it does not. "mean" = the point forecast (the floor is then the target).
   */
  provisionFor: "upper" | "mean";
  /** Currency of every cost the planner reports (a label, e.g. "USD"). */
  currency: string;
  /** Price of holding one GPU for an hour, per GPU type, in `currency` (default: planner/fleet DEFAULT_GPU_COST). */
  gpuHourPrices: Record<string, number>;
}

export interface ControllerConfig {
  /**
   * The scaling strategy (region/strategies/strategy-registry.ts). "keystage" holds the planner's target like LT-I and has
   * each instance of a pipelined endpoint (`keystage.pipelines`) split its GPUs over its stages by key-stage scaling;
   * under any other strategy a pipelined instance scales all its stages together (region/keystage/pipeline-engine.ts).
   */
  strategy: "reactive" | "reactive-hpa" | "demand" | "lt-i" | "lt-u" | "lt-ua" | "keystage";
  reconcileIntervalMs: number;
  /**
   * How a region's instances come and go: "agents" (default) — engine processes that node agents start and stop,
   * parameters over the data plane (region/actuator/agents.ts); "static" — the fixed engines of the config
   * (regions[].endpoints[].instances, engines.urls or --spawn-engines), which the controller cannot change;
   * "sim" — `tidegate dev` only: the region runtime on the simulated actuator the replays run (region/actuator/sim.ts,
   * SageServe §7.1 deploy delays) with in-process simulated engines, no data plane (region/runtime/sim-region.ts).
   */
  actuator: "agents" | "static" | "sim";
  /** Most scale steps one endpoint takes in one pass (a jump to the target starts every instance at once). */
  maxStepsPerPass: number;
  /** Backoff of a failing scale-out: first delay, doubling up to the max. */
  retryInitialMs: number;
  retryMaxMs: number;
  /** A node agent silent this long is lost: its instances go, the parameter pool restores its invariant. */
  agentLostAfterMs: number;
  /**
   * Where new instances' parameters come from and what they do while loading (issue 12; region/liveload/liveload-config.ts),
   * for every region without its own `regions[].loading`. Absent = the actuator's configured deploy delays.
   */
  loading?: LoadingConfig;
}

/** One model's parameter blocks as the data plane moves them (a scaled-down stand-in for real weights). */
export interface ModelParametersConfig {
  /** Bytes of the model's parameters on this deployment (real sizes do not fit a dev machine; see `scale`). */
  bytes: number;
  /**
   * Where a region's first copy comes from when no agent holds one: "pattern" = a synthetic model seeded by
   * `seed` (the stand-in for object storage; transfers are verified against it end to end); "none" = only from
   * copies agents already hold (a region with none reports "no source").
   */
  origin: "pattern" | "none";
  seed: number;
}

/** The parameter pool and multicast (DESIGN "Fast in-region scaling"). */
export interface ParametersConfig {
  /** Blocks per model (λScale's elbow is ≈ 16). */
  blockCount: number;
  /**
   * Complete copies of every hosted model the region keeps in its agents' host memory (BlitzScale §4.1's O(1) host
   * caching). When a node is lost and fewer remain, the pool copies one from what remains to another node.
   */
  minHostCopies: number;
  models: Record<ModelName, ModelParametersConfig>;
  /** "auto": BlitzScale chains, λScale binomial from `binomialMinTargets` targets on. */
  multicast: "auto" | "chain" | "binomial";
  binomialMinTargets: number;
  /** Expected rate of one link (bytes/s), for plans and ideal-time estimates. */
  linkBytesPerS: number;
  /** A peer silent this long fails the transfer (it is then re-planned). */
  stallMs: number;
  connectMs: number;
}

export interface EnginesConfig {
  kind: "sim" | "openai-http";
  /**
   * With the agents actuator: the command agents run for a real engine, e.g. "vllm serve {model} --port {port}"
   * (placeholders {model} {port} {host} {gpu} {tp} {instance}); absent = `tidegate engine-sim`.
   */
  commandTemplate?: string;
  /** How long a started engine may take to answer its health check. */
  startTimeoutMs: number;
  /** SIGTERM → SIGKILL grace when an engine is stopped. */
  stopGraceMs: number;
  /**
   * KV capacity (tokens) of in-process simulated engines (dev's, a static region's); absent = GPU memory × 0.9 −
   * weights. A smaller figure makes a small model's memory fill under a modest load (the burst test uses it).
   */
  kvCapacityTokens?: number;
  /**
   * Per-model settings of simulated engines, over `kvCapacityTokens`: vLLM's max_num_seqs (`maxBatch`, default 256)
   * and the KV cache in tokens. The router's in-flight estimate uses the same capacity (router/selector.ts).
   */
  models: Record<string, SimEngineModelConfig>;
  /** For `sim`: multiply simulated durations (1 = real time as measured; 0.01 = 100× faster). */
  timeScale: number;
  /** For `openai-http`: base URLs per `region/model`, e.g. {"us-east/llama2-70b": ["http://10.0.0.5:8000"]}. */
  urls: Record<string, string[]>;
}

/** One model's simulated-engine settings (engines.models). */
export interface SimEngineModelConfig {
  maxBatch?: number;
  kvCapacityTokens?: number;
}

export interface TidegateConfig {
  models: ModelConfig[];
  regions: RegionConfig[];
  router: RouterConfig;
  queue: QueueConfig;
  planner: PlannerConfig;
  controller: ControllerConfig;
  engines: EnginesConfig;
  parameters: ParametersConfig;
  /** Key-stage scaling of pipelined models (region/keystage); absent = none. */
  keystage?: KeystageConfig | undefined;
}

const MiB = 1024 * 1024;
/**
 * Default parameter bytes per model on dev machines: tens of MiB, growing with the model, far below the real
 * 2 bytes × params (a 3.2B model is 6.4 GB): `tidegate dev` and `tidegate region` print the scale used.
 */
export const DEFAULT_PARAMETER_BYTES: Readonly<Record<string, number>> = {
  "llama3.2-3b": 24 * MiB,
  "llama3.1-8b": 32 * MiB,
  "llama2-70b": 48 * MiB,
  "bloom-176b": 64 * MiB,
};

const DEFAULT_MODELS: ModelConfig[] = [
  { name: "llama2-70b", gpusPerInstance: { "a100-80gb": 4, "h100-80gb": 4 } },
  { name: "bloom-176b", gpusPerInstance: { "a100-80gb": 8, "h100-80gb": 8 } },
  { name: "llama3.1-8b", gpusPerInstance: { "a100-80gb": 2, "h100-80gb": 2 } },
  { name: "llama3.2-3b", gpusPerInstance: { "a100-80gb": 2, "h100-80gb": 2 } },
];

function defaultRegion(name: string, utcOffsetH: number, proximity: string[], port: number): unknown {
  return {
    name,
    utcOffsetH,
    proximity,
    grpcAddress: `127.0.0.1:${port}`,
    gpus: [{ type: "h100-80gb", count: 64 }],
    endpoints: DEFAULT_MODELS.map((m) => ({ model: m.name, gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 8 })),
  };
}

/** The embedded default: 3 regions, 4 models, simulated engines in real time, embedded queue. */
export const DEFAULT_CONFIG_JSON: unknown = {
  models: DEFAULT_MODELS,
  regions: [
    defaultRegion("us-east", -5, ["us-central", "us-west"], 50051),
    defaultRegion("us-central", -6, ["us-east", "us-west"], 50052),
    defaultRegion("us-west", -8, ["us-central", "us-east"], 50053),
  ],
};

export function parseConfig(json: unknown): TidegateConfig {
  const root = new ObjectReader(json, "");
  const models = root.array("models", (v, path) => {
    const r = new ObjectReader(v, path);
    const name = r.string("name");
    if (MODEL_SPECS[name] === undefined) r.fail("name", `unknown model ${JSON.stringify(name)}; known: ${Object.keys(MODEL_SPECS).join(", ")}`);
    const gpr = r.object("gpusPerInstance", true);
    const gpusPerInstance: Record<string, number> = {};
    for (const gpu of Object.keys(gpr.value)) {
      if (GPU_SPECS[gpu] === undefined) gpr.fail(gpu, `unknown GPU type; known: ${Object.keys(GPU_SPECS).join(", ")}`);
      gpusPerInstance[gpu] = gpr.number(gpu, undefined, { integer: true, min: 1, max: 64 });
    }
    gpr.done();
    r.done();
    return { name, gpusPerInstance };
  }, DEFAULT_MODELS, { minLength: 1 });
  const modelNames = new Set<string>();
  models.forEach((m, i) => {
    if (modelNames.has(m.name)) throw new ValidationError(`models[${i}].name`, `duplicate model ${JSON.stringify(m.name)}`);
    modelNames.add(m.name);
  });

  const regions = root.array("regions", (v, path) => parseRegion(v, path, models), undefined, { minLength: 1 });
  const regionNames = new Set<string>();
  regions.forEach((r, i) => {
    if (regionNames.has(r.name)) throw new ValidationError(`regions[${i}].name`, `duplicate region ${JSON.stringify(r.name)}`);
    regionNames.add(r.name);
  });
  regions.forEach((r, i) =>
    r.proximity.forEach((p, j) => {
      if (!regionNames.has(p)) throw new ValidationError(`regions[${i}].proximity[${j}]`, `unknown region ${JSON.stringify(p)}`);
    }),
  );
  models.forEach((m, i) => {
    if (!regions.some((r) => r.endpoints.some((e) => e.model === m.name))) {
      throw new ValidationError(`models[${i}]`, `model ${JSON.stringify(m.name)} has no endpoint in any region`);
    }
  });

  const rr = root.object("router");
  const router: RouterConfig = {
    host: rr.string("host", "127.0.0.1"),
    port: rr.number("port", 8080, { integer: true, min: 0, max: 65535 }),
    bodyLimitBytes: rr.number("bodyLimitBytes", 4 * 1024 * 1024, { integer: true, min: 1024 }),
    memoryThreshold: rr.number("memoryThreshold", 0.7, { gt: 0, max: 1 }),
    apiKeys: rr.array("apiKeys", (v, path) => {
      const k = new ObjectReader(v, path);
      const key = k.string("key");
      const tenant = k.string("tenant");
      const region = k.optionalString("region");
      const keyMaxInflight = k.optionalNumber("maxInflight", { integer: true, min: 1 });
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
      return { key, tenant, ...(region === undefined ? {} : { region }), ...(keyRegions === undefined ? {} : { regions: keyRegions }), ...(keyModels === undefined ? {} : { models: keyModels }), ...(keyMaxInflight === undefined ? {} : { maxInflight: keyMaxInflight }) };
    }, []),
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
  };
  rr.done();

  const qr = root.object("queue");
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
    reopenBelow: qr.number("reopenBelow", 0.45, { gt: 0, max: 1 }),
    reopenReports: qr.number("reopenReports", 3, { integer: true, min: 1 }),
    maxPerReport: qr.number("maxPerReport", 64, { integer: true, min: 1 }),
    paceDispatch: qr.boolean("paceDispatch", true),
    paceGroup: qr.number("paceGroup", 4, { integer: true, min: 1 }),
    refillIdle: qr.boolean("refillIdle", true),
    promoteAfterMs: qr.number("promoteAfterMs", 10 * 3600_000, { gt: 0 }),
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
  if (queue.reopenBelow > queue.dispatchOneBelow) qr.fail("reopenBelow", `must be ≤ dispatchOneBelow (${queue.dispatchOneBelow})`);
  qr.done();

  const pr = root.object("planner");
  const planner: PlannerConfig = {
    intervalMs: pr.number("intervalMs", 3600_000, { gt: 0 }),
    advisory: pr.boolean("advisory", false),
    alpha: pr.number("alpha", 0.8, { gt: 0, max: 1 }),
    beta: pr.number("beta", 0.2, { min: 0, max: 10 }),
    provisionFor: pr.string("provisionFor", "upper", { oneOf: ["upper", "mean"] }) as PlannerConfig["provisionFor"],
    currency: pr.string("currency", "USD"),
    gpuHourPrices: {},
  };
  const gp = pr.object("gpuHourPrices");
  for (const g of Object.keys(gp.value)) {
    if (GPU_SPECS[g] === undefined) gp.fail(g, `unknown GPU type; known: ${Object.keys(GPU_SPECS).join(", ")}`);
    planner.gpuHourPrices[g] = gp.number(g, undefined, { min: 0 });
  }
  gp.done();
  pr.done();

  const cr = root.object("controller");
  const controller: ControllerConfig = {
    strategy: cr.string("strategy", "lt-ua", { oneOf: ["reactive", "reactive-hpa", "demand", "lt-i", "lt-u", "lt-ua", "keystage"] }) as ControllerConfig["strategy"],
    reconcileIntervalMs: cr.number("reconcileIntervalMs", 1000, { gt: 0 }),
    actuator: cr.string("actuator", "agents", { oneOf: ["agents", "static", "sim"] }) as ControllerConfig["actuator"],
    maxStepsPerPass: cr.number("maxStepsPerPass", 8, { integer: true, min: 1, max: 1000 }),
    retryInitialMs: cr.number("retryInitialMs", 1000, { gt: 0 }),
    retryMaxMs: cr.number("retryMaxMs", 60_000, { gt: 0 }),
    agentLostAfterMs: cr.number("agentLostAfterMs", 3000, { gt: 0 }),
  };
  const loading = parseLoadingConfig(cr.raw("loading"), "controller.loading");
  if (loading !== undefined) controller.loading = loading;
  if (controller.retryMaxMs < controller.retryInitialMs) cr.fail("retryMaxMs", `must be ≥ retryInitialMs (${controller.retryInitialMs})`);
  cr.done();

  const er = root.object("engines");
  const urlsReader = er.object("urls");
  const urls: Record<string, string[]> = {};
  for (const key of Object.keys(urlsReader.value)) {
    urls[key] = urlsReader.array(key, (v, path) => {
      if (typeof v !== "string" || !/^https?:\/\//.test(v)) throw new ValidationError(path, "expected an http(s) URL");
      return v;
    }, undefined, { minLength: 1 });
  }
  urlsReader.done();
  const commandTemplate = er.optionalString("commandTemplate");
  if (commandTemplate !== undefined) {
    if (commandTemplate.trim() === "") er.fail("commandTemplate", "must not be empty (omit it to run engine-sim)");
    for (const m of commandTemplate.matchAll(/\{([^}]*)\}/g)) {
      if (!["model", "port", "host", "gpu", "tp", "instance"].includes(m[1]!)) er.fail("commandTemplate", `unknown placeholder {${m[1]}}; known: {model} {port} {host} {gpu} {tp} {instance}`);
    }
    if (!commandTemplate.includes("{port}")) er.fail("commandTemplate", "must contain {port} (the agent picks the engine's port)");
  }
  const engines: EnginesConfig = {
    kind: er.string("kind", "sim", { oneOf: ["sim", "openai-http"] }) as EnginesConfig["kind"],
    timeScale: er.number("timeScale", 1, { gt: 0, max: 1000 }),
    urls,
    ...(commandTemplate === undefined ? {} : { commandTemplate }),
    startTimeoutMs: er.number("startTimeoutMs", 60_000, { gt: 0 }),
    stopGraceMs: er.number("stopGraceMs", 5000, { min: 0 }),
    ...present("kvCapacityTokens", er.optionalNumber("kvCapacityTokens", { integer: true, min: 2 })),
    models: {},
  };
  const emr = er.object("models");
  for (const name of Object.keys(emr.value)) {
    if (!models.some((m) => m.name === name)) emr.fail(name, `unknown model; configured: ${models.map((m) => m.name).join(", ")}`);
    const mr = emr.object(name);
    engines.models[name] = {
      ...present("maxBatch", mr.optionalNumber("maxBatch", { integer: true, min: 1, max: 65_536 })),
      ...present("kvCapacityTokens", mr.optionalNumber("kvCapacityTokens", { integer: true, min: 2 })),
    };
    mr.done();
  }
  emr.done();
  er.done();
  const parameters = parseParameters(root.object("parameters"), models);
  const keystage = parseKeystageConfig(root.raw("keystage"));
  checkPipelinedEndpoints(keystage, models, controller, engines);
  root.done();
  return { models, regions, router, queue, planner, controller, engines, parameters, ...(keystage === undefined ? {} : { keystage }) };
}

/**
 * The rules between the `keystage` section and the rest: the keystage strategy needs pipelines; each pipeline is a
 * configured model with GPUs per instance for its GPU type, enough for `minReplicasPerStage` replicas of every
 * stage (an instance's GPUs are the budget its stages share); a pipeline runs in engine-sim, not a command template.
 */
function checkPipelinedEndpoints(keystage: KeystageConfig | undefined, models: ModelConfig[], controller: ControllerConfig, engines: EnginesConfig): void {
  if (keystage === undefined) {
    if (controller.strategy === "keystage") throw new ValidationError("controller.strategy", `"keystage" splits pipelined instances over their stages: add a keystage section with its pipelines`);
    return;
  }
  keystage.pipelines.forEach((p, i) => {
    const path = `keystage.pipelines[${i}]`;
    const gpus = models.find((m) => m.name === p.model)?.gpusPerInstance[p.gpu];
    if (gpus === undefined) throw new ValidationError(path, `${p.model} on ${p.gpu} is not configured: models[] needs gpusPerInstance["${p.gpu}"] for ${p.model}`);
    const need = p.layersPerStage.length * keystage.params.minReplicasPerStage;
    if (gpus < need) {
      throw new ValidationError(path, `an instance of ${p.model} on ${p.gpu} has ${gpus} GPUs (models[].gpusPerInstance); ${p.layersPerStage.length} stages × ${keystage.params.minReplicasPerStage} replicas (keystage.params.minReplicasPerStage) need ≥ ${need}`);
    }
    if (engines.commandTemplate !== undefined) throw new ValidationError(path, "pipelined instances run in engine-sim; engines.commandTemplate starts another engine that tidegate cannot split into stages");
  });
}

/**
 * `{ [key]: value }`, or `{}` when the value is absent (an optional key read with the reader's `optional*` methods;
 * a key read or asked about with `has` is a known field, so a misspelling of it gets the suggestion — "engines.
 * kvCapacityToken: … did you mean "kvCapacityTokens"?" — even when the file does not set it).
 */
function present<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

function parseParameters(r: ObjectReader, models: ModelConfig[]): ParametersConfig {
  const blockCount = r.number("blockCount", 16, { integer: true, min: 1, max: 4096 });
  const mr = r.object("models");
  for (const name of Object.keys(mr.value)) if (!models.some((m) => m.name === name)) mr.fail(name, `unknown model ${JSON.stringify(name)} (not in models[])`);
  const perModel: Record<string, ModelParametersConfig> = {};
  models.forEach((m, i) => {
    const given = mr.has(m.name);
    const one = given ? mr.object(m.name) : new ObjectReader({}, `parameters.models.${m.name}`);
    const bytes = one.number("bytes", DEFAULT_PARAMETER_BYTES[m.name] ?? 32 * MiB, { integer: true, min: blockCount * 8 });
    const origin = one.string("origin", "pattern", { oneOf: ["pattern", "none"] }) as ModelParametersConfig["origin"];
    const seed = one.number("seed", i + 1, { integer: true, min: 0, max: 2 ** 31 - 1 });
    one.done();
    perModel[m.name] = { bytes, origin, seed };
  });
  mr.done();
  const parameters: ParametersConfig = {
    blockCount,
    minHostCopies: r.number("minHostCopies", 1, { integer: true, min: 1, max: 16 }),
    models: perModel,
    multicast: r.string("multicast", "auto", { oneOf: ["auto", "chain", "binomial"] }) as ParametersConfig["multicast"],
    binomialMinTargets: r.number("binomialMinTargets", 4, { integer: true, min: 1 }),
    linkBytesPerS: r.number("linkBytesPerS", 1.25e9, { gt: 0 }),
    stallMs: r.number("stallMs", 1000, { integer: true, min: 1 }),
    connectMs: r.number("connectMs", 2000, { integer: true, min: 1 }),
  };
  r.done();
  return parameters;
}

function parseRegion(v: unknown, path: string, models: ModelConfig[]): RegionConfig {
  const r = new ObjectReader(v, path);
  const name = r.string("name");
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) r.fail("name", "must be lowercase letters, digits and dashes");
  const utcOffsetH = r.number("utcOffsetH", 0, { min: -12, max: 14 });
  const proximity = r.array("proximity", (p, pp) => {
    if (typeof p !== "string") throw new ValidationError(pp, "expected a region name");
    return p;
  }, []);
  const grpcAddress = r.string("grpcAddress", "127.0.0.1:0");
  const maxEjectedPercent = r.number("maxEjectedPercent", 50, { min: 0, max: 100 });
  const loading = parseLoadingConfig(r.raw("loading"), `${path}.loading`);
  const gpus = r.array("gpus", (g, gp) => {
    const gr = new ObjectReader(g, gp);
    const type = gr.string("type");
    if (GPU_SPECS[type] === undefined) gr.fail("type", `unknown GPU type ${JSON.stringify(type)}; known: ${Object.keys(GPU_SPECS).join(", ")}`);
    const count = gr.number("count", undefined, { integer: true, min: 0 });
    gr.done();
    return { type, count };
  }, undefined, { minLength: 1 });
  const endpoints = r.array("endpoints", (e, ep) => {
    const er = new ObjectReader(e, ep);
    const model = er.string("model");
    const spec = models.find((m) => m.name === model);
    if (spec === undefined) return er.fail("model", `unknown model ${JSON.stringify(model)} (not in models[])`);
    const gpu = er.string("gpu");
    if (!gpus.some((g) => g.type === gpu)) er.fail("gpu", `region has no GPUs of type ${JSON.stringify(gpu)}`);
    if (spec.gpusPerInstance[gpu] === undefined) er.fail("gpu", `model ${model} has no gpusPerInstance for ${gpu}`);
    const minInstances = er.number("minInstances", 0, { integer: true, min: 0 });
    const maxInstances = er.number("maxInstances", 1000, { integer: true, min: 1 });
    if (maxInstances < minInstances) er.fail("maxInstances", `must be ≥ minInstances (${minInstances})`);
    const instances = er.number("instances", minInstances, { integer: true, min: minInstances, max: maxInstances });
    er.done();
    return { model, gpu, instances, minInstances, maxInstances };
  }, undefined, { minLength: 1 });
  // Capacity check: the starting instances must fit the region's GPUs.
  for (const g of gpus) {
    const used = endpoints
      .filter((e) => e.gpu === g.type)
      .reduce((s, e) => s + e.instances * (models.find((m) => m.name === e.model)!.gpusPerInstance[g.type] ?? 0), 0);
    if (used > g.count) {
      const gi = gpus.indexOf(g);
      throw new ValidationError(`${path}.gpus[${gi}].count`, `${g.count} ${g.type} GPUs cannot hold the ${used} the starting instances need`);
    }
  }
  r.done();
  return { name, utcOffsetH, proximity, gpus, endpoints, grpcAddress, maxEjectedPercent, ...(loading === undefined ? {} : { loading }) };
}

/**
 * A partial config merged over the embedded default: objects merge key by key (the file wins), arrays and scalars
 * replace. So `{"controller":{"strategy":"reactive"}}` is the default fleet with another strategy, and a file that
 * gives `regions` brings its own regions.
 */
export function mergeOverDefault(partial: unknown, base: unknown = DEFAULT_CONFIG_JSON): unknown {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (!isObject(partial) || !isObject(base)) return partial;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(partial)) out[k] = k in base ? mergeOverDefault(v, base[k]) : v;
  return out;
}

/** Splits a ValidationError path (`regions[1].gpus[0].count`) into keys and indexes. */
function pathSegments(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  return out;
}

/**
 * Validates `json` and reports every error, not just the first: after each error the offending field is removed
 * and validation runs again (at most 50 rounds; a field whose removal only makes it "required" ends the search
 * for that path; an error that removing a field caused in its container is not reported). Returns the config when
 * there is no error.
 */
export function validateConfig(json: unknown): { config?: TidegateConfig; errors: ValidationError[] } {
  let doc: unknown = structuredClone(json);
  const errors: ValidationError[] = [];
  const seen = new Set<string>();
  for (let round = 0; round < 50; round++) {
    try {
      const config = parseConfig(doc);
      return errors.length === 0 ? { config, errors } : { errors };
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      if (seen.has(err.path)) return { errors };
      seen.add(err.path);
      // An error on a container that held a field removed here ("must have at least 2 element(s)" once a bad
      // element is gone) is an artifact of the search, not the user's: remove the container without reporting it.
      const artifact = errors.some((e) => e.path.startsWith(`${err.path}[`) || e.path.startsWith(`${err.path}.`));
      if (!artifact) errors.push(err);
      const segs = pathSegments(err.path);
      let parent: unknown = doc;
      for (const s of segs.slice(0, -1)) parent = (parent as Record<string | number, unknown> | undefined)?.[s];
      const last = segs[segs.length - 1];
      if (last === undefined || typeof parent !== "object" || parent === null) return { errors };
      if (Array.isArray(parent) && typeof last === "number") parent.splice(last, 1);
      else delete (parent as Record<string, unknown>)[String(last)];
    }
  }
  return { errors };
}

/**
 * Reads a config file, merges it over the embedded default (mergeOverDefault) and validates it; `undefined` gives
 * the embedded default. `file` may list several files separated by commas, merged in order (later files win), e.g.
 * `tidegate.json,secrets.json` where the second (a Kubernetes Secret) holds router.apiKeys, router.adminKeys and
 * queue.redisUrl. Every error is reported, one per line, each naming its path (and the nearest known key for an
 * unknown one).
 */
export function loadConfig(file?: string): TidegateConfig {
  if (file === undefined) return parseConfig(DEFAULT_CONFIG_JSON);
  let doc: unknown = DEFAULT_CONFIG_JSON;
  for (const f of file.split(",").filter((x) => x !== "")) {
    let text: string;
    try {
      text = readFileSync(f, "utf8");
    } catch (err) {
      throw new ValidationError(f, `cannot read config file: ${(err as Error).message}`);
    }
    doc = mergeOverDefault(parseJson(text, `config file ${f}`, "invalid_config"), doc);
  }
  const { config, errors } = validateConfig(doc);
  if (config !== undefined) return config;
  if (errors.length === 1) throw errors[0]!;
  throw new TidegateError("invalid_config", `config file ${file} has ${errors.length} errors:\n  ${errors.map((e) => e.message).join("\n  ")}`, { cause: errors[0] });
}

/** The models an endpoint list of a region serves. */
export function regionModels(region: RegionConfig): ModelName[] {
  return [...new Set(region.endpoints.map((e) => e.model))];
}

/** Region `name`'s loading source: its own `loading`, else `controller.loading`, else none (configured delays). */
export function regionLoading(config: TidegateConfig, name: RegionName): LoadingConfig | undefined {
  return config.regions.find((r) => r.name === name)?.loading ?? config.controller.loading;
}

/** GPUs per instance of `model` on `gpu` (models[].gpusPerInstance); undefined where the config has none. */
export function gpusPerInstanceOf(config: Pick<TidegateConfig, "models">, model: ModelName, gpu: GpuType): number | undefined {
  return config.models.find((m) => m.name === model)?.gpusPerInstance[gpu];
}

/** gpusPerInstanceOf for a (model, gpu) the config validated (an endpoint's): an invalid_config error where it is absent. */
export function instanceGpus(config: Pick<TidegateConfig, "models">, model: ModelName, gpu: GpuType): number {
  const n = gpusPerInstanceOf(config, model, gpu);
  if (n === undefined) throw new TidegateError("invalid_config", `${model} has no gpusPerInstance for ${gpu}`);
  return n;
}
