/**
 * The ports between tiers (DESIGN "Ports and their adapters"). Adapters live in their tiers; these are the shapes.
 */
import type { KvEventListener } from "./prefix.js";
import type { GpuType, ModelName, RegionName } from "./models.js";

/** Priority 0: interactive, and batch promoted by age. Priority 1: batch. (SageServe §6.3) */
export type Priority = 0 | 1;

/** One generation request as the tiers see it, after parsing and validation of the OpenAI body. */
export interface GenerateRequest {
  /** Unique per request (the router's id, or the batch request id for NIW; idempotency key). */
  id: string;
  model: ModelName;
  /** Which OpenAI endpoint the body belongs to. */
  kind: "chat" | "completion";
  /** Prompt length in tokens (≥ 1). */
  promptTokens: number;
  /** Most output tokens to generate (≥ 1). */
  maxTokens: number;
  priority: Priority;
  /**
   * A batch (NIW) request sent by the queue manager, whatever its priority (a promoted one runs at 0): the region
   * counts its tokens apart, so the planner's interactive history does not count batch twice.
   */
  batch?: boolean;
  /** The OpenAI request body, forwarded as is by HTTP adapters (with `stream` set by the adapter). */
  body: Record<string, unknown>;
  /**
   * The prompt's block hashes (core/prefix.ts; issue 34), when known: from the body with the chat template applied
   * (the gateway computes them), or from a trace's `hash_ids` in replay. An engine that caches prefixes uses them
   * where it cannot read the prompt itself (engine-sim in process); HTTP adapters do not forward them.
   */
  blockHashes?: readonly number[];
  /**
   * Prompt tokens the routing expects the chosen instance to hold in its prefix cache (the region gateway's prefix
   * index; absent = none known). An adapter that counts its in-flight work itself (openai-http: remainingTokens)
   * leaves them out, as an engine with a prefix cache does; the engine computes its own hit.
   */
  expectedCachedTokens?: number;
  /**
   * Prompt tokens whose KV a prefill instance computed and this (decode) instance received before the request entered
   * its queue (prefill/decode disaggregation; engines/sim/kv-transfer.ts): not computed here. Lost if the
   * request is preempted (its KV is then recomputed).
   */
  remotePrefillTokens?: number;
  /**
   * Prefill/decode disaggregation over vLLM's contract (region/gateway/pd.ts; engines/sim/kv-transfer.ts):
   * `remoteDecode` asks a prefill instance to prefill for a remote decode (one output token, not streamed; its `done`
   * carries `kvTransferParams`); `params` hands a decode instance those params, so it pulls the prompt's KV instead
   * of computing it. HTTP adapters send them as the body's `kv_transfer_params`.
   */
  kvTransfer?: { remoteDecode: true } | { params: Readonly<Record<string, unknown>> };
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type FinishReason = "stop" | "length";

/** What an engine emits while generating: text pieces, then exactly one `done` (or the iterable throws). */
export type EngineEvent =
  | { type: "token"; text: string; /** tokens this piece carries (≥ 1) */ tokens: number }
  | { type: "done"; finishReason: FinishReason; usage: Usage; /** a prefill for a remote decode: where its KV is held (GenerateRequest.kvTransfer) */ kvTransferParams?: Readonly<Record<string, unknown>> };

/** A snapshot of one serving instance (vLLM exposes the same through /metrics). */
export interface EngineStats {
  /** KV-cache bytes in use and available to requests (capacity = GPU memory × utilization − weights). */
  kvBytesUsed: number;
  kvBytesCapacity: number;
  /** Requests in the running batch and waiting for admission. */
  running: number;
  waiting: number;
  /**
   * Prompt + max output tokens still to process over all running and waiting requests (JSQ metric). An engine with a
   * prefix cache leaves out the prompt tokens it finds (engine-sim: those found at admission, and for a waiting
   * request those cached when it was queued), so they do not count as work.
   */
  remainingTokens: number;
  /** Output tokens generated since start (monotonic), for tokens/s. */
  generatedTokensTotal: number;
  /**
   * True when the engine's own signals (KV usage, queue lengths) could not be read lately: the values above are the
   * last known ones, not current. A stale instance is routed around and counts as full in utilization. Absent = fresh.
   */
  stale?: boolean;
  /**
   * KV-cache bytes (of kvBytesUsed) held by running requests the engine would preempt for a priority 0 request (its
   * priority 1 batch work; vLLM priority scheduling). Absent: the engine does not preempt, or does not say — none of
   * its KV counts as preemptible.
   */
  preemptibleKvBytes?: number;
  /** Requests the engine has preempted since it started (monotonic); absent where the engine does not say. */
  preemptionsTotal?: number;
  /**
   * Prefix caching (issue 34), vLLM's `prefix_cache_queries` / `prefix_cache_hits` counters: prompt tokens looked up
   * in the cache and found there, since start (monotonic). Absent where the engine does not cache or does not say.
   */
  prefixQueriedTokensTotal?: number;
  prefixHitTokensTotal?: number;
  /**
   * Host-memory KV tier (engine-sim's; LMCache / vLLM CPU offloading), where the engine has one: prompt tokens looked
   * up there (those past the GPU hit) and of them found there, loaded instead of recomputed (not in the two above).
   */
  hostKvQueriedTokensTotal?: number;
  hostKvHitTokensTotal?: number;
}

/** A push consumer of one request's events (core/push.ts: the contract, streamOf, pushFrom). */
export interface EventSink {
  /** One event; a `done` is the last. Returns false when the consumer is full: pause until `Flow.resume`. */
  event(ev: EngineEvent): boolean;
  /** The request failed (nothing follows). */
  fail(err: unknown): void;
}

/** What `open` returns: the consumer's handle on the producer's pace. */
export interface Flow {
  /** The consumer has room again after `event` returned false. Idempotent. */
  resume(): void;
}

/** Callbacks of one request in callback form (clock ms); called as methods, so one object per request suffices. */
export interface RequestCallbacks {
  onFirstToken?(atMs: number): void;
  /** The request finished: its output tokens generated. */
  onDone?(atMs: number, generatedTokens: number): void;
  /** The request failed after it was accepted (the engine went away); callback-form engines may never call it. */
  onError?(atMs: number, err: unknown): void;
}

/** One serving instance (SageServe §3.4). */
export interface Engine {
  readonly instanceId: string;
  readonly model: ModelName;
  /**
   * Prefill/decode disaggregation: "prefill" serves only prefills for a remote decode, "decode" only decodes from a
   * remote prefill (GenerateRequest.kvTransfer); absent or "both": plain requests (region/gateway/pd.ts).
   */
  readonly role?: "prefill" | "decode" | "both";
  /**
   * Switches a serving prefill instance to decode, or back (BlitzScale §5.2: a decode scale-out that switches a prefill
   * instance serves decodes at once, the parameters being the same). Requests under way finish as they started;
   * `role` holds the new role once this resolves. Absent: the engine cannot switch.
   */
  switchRole?(role: "prefill" | "decode"): Promise<void>;
  /**
   * Streams the generation; aborting `signal` cancels it upstream and frees its KV memory. The consumer reads to the
   * end or calls the iterator's `return()` (a `for await` that breaks does): an adapter's per-request cleanup (its
   * in-flight count, its connection) runs only then — a stream left suspended after `done` leaks it.
   */
  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent>;
  /**
   * Optional push form of `generate` (core/push.ts): the same request, each event handed to `sink` as it arrives, no
   * promise per token; aborting `signal` cancels it and fails the sink. The gateway uses it where present (the
   * openai-http adapter: the live token path), else it pushes from `generate`.
   */
  open?(req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow;
  /**
   * Optional callback form of `generate` for engines that run on the injected Clock (engine-sim in one process):
   * the same request, no stream — `onFirstToken` and `onDone` fire at their clock times. Throws like `generate`
   * before its first event. The gateway uses it where present (Gateway.submit), else it drives `generate`.
   */
  submit?(req: GenerateRequest, callbacks: RequestCallbacks): void;
  stats(): EngineStats;
  /**
   * Optional liveness as the adapter last saw it: true (answering or streaming), false (dead or hung: refused, reset,
   * or silent while it owes bytes — not merely slow), undefined (nothing seen yet). Engines without it are assumed
   * alive. The static region marks an instance whose engine says false as not serving until it says true again,
   * within its ejection cap (region/process/engine-health.ts).
   */
  healthy?(): boolean | undefined;
  /** Optional: why `healthy()` says false (logged when the instance is taken out of service); undefined otherwise. */
  unhealthyReason?(): string | undefined;
  /**
   * Optional serve-while-loading control (issue 12; engines/sim/layerwise/layerwise-host.ts): the region pairs this serving
   * engine with a loading instance of its model and updates the pairing as the new instance's blocks arrive.
   * Engines without it (a real vLLM) serve alone while a peer loads.
   */
  layerwise?: LayerwiseControl;
  /**
   * Optional KV-cache events of the engine's prefix cache (issue 34; vLLM kv_events): what blocks it stores and
   * evicts, for a router's index of what each instance holds. engine-sim in process has it; the openai-http adapter
   * has it where the server streams `/v1/kv_events` (engine-sim does). Absent: the router indexes routing history.
   */
  kvEvents?: KvEventSource;
  /** Releases connections/timers. Idempotent. */
  close(): Promise<void>;
}

/** A subscription to an engine's KV-cache events (Engine.kvEvents). */
export interface KvEventSource {
  /** Tokens per KV block (the engine's block size; a router hashes prompts with it). */
  readonly blockTokens: number;
  /** Calls `listener` for every event from now on, in order; returns the unsubscribe. */
  subscribe(listener: KvEventListener): () => void;
  /** The hashes cached now (a subscriber's starting point), when the source can say; else undefined. */
  snapshot?(): number[] | undefined;
  /** The hashes its host-memory KV tier holds now (KvEvent medium "CPU"), where it has one. */
  hostSnapshot?(): number[] | undefined;
}

// ---- serve while loading (issue 12; engines/sim/layerwise/ on the engine, region/liveload/ in the region) ----

/** How a serving engine splits a loading episode's batches with its loading peer (BlitzScale §5.2). */
export type PairScheduler = "best-effort" | "zigzag";

/** One update of a live pairing, region → serving engine. */
export interface PairSpec {
  /** The loading instance's id (one pairing per serving engine at a time). */
  peer: string;
  scheduler: PairScheduler;
  /** Layers of the model. */
  layers: number;
  /** Layers the peer holds now, from the first (a layer runs there only after the ones before it). */
  arrivedLayers: number;
  /** For each layer not there yet (layers − arrivedLayers entries): ms from now it is expected, non-decreasing. */
  expectedInMs: number[];
  /** Activation transfer per prompt token of a split batch (ms at full scale: the engine applies its time scale). */
  hopMsPerToken: number;
  /** The pairing ends by itself this long after the last update (ms). */
  ttlMs: number;
}

/** What an engine reports of its pairing (GET /tidegate/layerwise, and the reply to every update). */
export interface PairStatus {
  /** The pairing now, if any. */
  current?: { peer: string; scheduler: PairScheduler; layers: number; arrivedLayers: number; updates: number; episodes: number; zigzagEpisodes: number; sinceMs: number };
  /** Since the engine started. */
  totals: { pairs: number; updates: number; episodes: number; zigzagEpisodes: number; expired: number };
  /** The last pairing that ended: with whom, why ("loaded", "ended by the region", "expired: …") and what it did. */
  ended?: { peer: string; why: string; updates: number; episodes: number; zigzagEpisodes: number };
}

/** What the region calls on a serving engine (Engine.layerwise). */
export interface LayerwiseControl {
  /** Starts or updates the pairing with `spec.peer`. */
  update(spec: PairSpec): Promise<PairStatus>;
  /** Ends the pairing with `peer`. */
  end(peer: string): Promise<PairStatus>;
}

/** Instance lifecycle states a region reports (DESIGN, region controller). */
export type InstanceState = "provisioning" | "loading" | "serving" | "draining" | "spot";

export interface EndpointTelemetry {
  /** Deployment id within the region, e.g. `llama2-70b/h100-80gb`. */
  endpointId: string;
  gpu: GpuType;
  /** KV in use / (GPU memory − weights), summed over the endpoint's serving instances; in [0, 1] (may exceed 1 when overloaded). */
  effectiveMemoryUtilization: number;
  /**
   * The part of `effectiveMemoryUtilization` held by batch work the engines would preempt for a priority 0 request
   * (EngineStats.preemptibleKvBytes). Present only when every serving instance reports it (engines that preempt);
   * absent, none of the KV counts as preemptible. `routingUtilization` (core/utilization.ts) is what is left.
   */
  preemptibleMemoryUtilization?: number;
  servingInstances: number;
  /** The endpoint's instances by state (the actuator's view, spot included); absent from regions that do not know. */
  instances?: Record<InstanceState, number>;
  /**
   * The part of `instances` in each prefill/decode pool of a disaggregated model (issue 48; the actuator's view): what
   * the planner counts as each pool's current instances. Absent for a colocated endpoint and from regions that do not know.
   */
  pools?: Partial<Record<PoolRole, Record<InstanceState, number>>>;
  /**
   * Expected time of one scale-out, decision to serving (ms): the region's last measured one for this endpoint, else
   * the data plane's ideal transfer time for the model; absent when the region cannot say (static regions).
   */
  expectedScaleOutMs?: number;
}

export interface ModelTelemetry {
  model: ModelName;
  /** Over all of the model's serving instances in the region. */
  effectiveMemoryUtilization: number;
  /** The preemptible (batch) part of it, over the same instances; as EndpointTelemetry.preemptibleMemoryUtilization. */
  preemptibleMemoryUtilization?: number;
  /**
   * Preemptions the model's engines (serving and draining) have counted since each started (Σ EngineStats
   * .preemptionsTotal); absent when none says. Not monotonic: an engine that restarts or leaves takes its count away.
   */
  preemptionsTotal?: number;
  /** Output+prompt tokens per second served over the last telemetry window, batch included. */
  tokensPerS: number;
  /** The part of `tokensPerS` that batch requests (GenerateRequest.batch) took; absent from older regions. */
  batchTokensPerS?: number;
  /**
   * Demand reaching the region: prompt + max output tokens per second of the requests that entered its gateway over
   * the window, placed or not — what LT-UA compares with the forecast (served tokens/s saturates under a burst).
   */
  demandTokensPerS?: number;
  running: number;
  waiting: number;
  instances: Record<InstanceState, number>;
  endpoints: EndpointTelemetry[];
  /** Serving or draining instances whose stats are stale (EngineStats.stale); absent when none. */
  staleInstances?: number;
  /** SLO attainment of the model's interactive requests (issue 31); absent from regions that do not measure it. */
  slo?: SloTelemetry;
  /**
   * Present when the region scales the model from zero (issue 33): a request that finds no serving instance is held
   * there while one comes up (region/gateway/cold-hold.ts) rather than refused, so the router may send it there.
   */
  cold?: ColdStartTelemetry;
}

/** A model the region scales from zero: requests held now, and the expected time to its first serving instance. */
export interface ColdStartTelemetry {
  held: number;
  /** Expected ms from a scale-out decision to serving (the actuator's measured or ideal figure); absent = unknown. */
  expectedMs?: number;
}

/**
 * The model's interactive requests judged against its SLO (core/config slo-section.ts), as running totals since the
 * region process started — what the planner's correction factor and its plan report's attainment read. Totals, not
 * windows: every reader (each telemetry stream, `/metrics`, the controller) reads the same figures, and a reader takes
 * the difference between two reports (planner/slo-window.ts); totals that go down mean the region restarted.
 */
export interface SloTelemetry {
  /** Interactive requests that ended: finished, broke after their first token, or failed / refused before it. */
  requests: number;
  /** Of those, the ones that met both the TTFT and the TPOT target (one never served is a miss). */
  met: number;
  /** Of those, the ones that finished, and their prompt and output tokens (the mix the planner sizes capacity for). */
  finished: number;
  promptTokens: number;
  outputTokens: number;
}

/** Region → global, at least once a second. `seq` increases per region process; `atMs` is the region's clock. */
export interface RegionTelemetry {
  region: RegionName;
  seq: number;
  atMs: number;
  models: ModelTelemetry[];
}

/** Global/planner → region: hourly targets. `decisionId` is monotonic per planner leadership; regions ack it. */
export interface RegionTargets {
  decisionId: number;
  region: RegionName;
  /** When the plan was made (planner clock) and the hour it is for. */
  madeAtMs: number;
  /** Advisory plans are published for people, never acted on. */
  advisory: boolean;
  endpoints: TargetEndpoint[];
}

/** One forecast step's demand (tokens/s): the point forecast and its 10% lower and 90% upper bounds. */
export interface DemandStep {
  mean: number;
  lower: number;
  upper: number;
}

/** One endpoint's hourly target. */
/** A prefill or decode pool of a disaggregated model (issue 48; config endpoint `role`); undefined = colocated. */
export type PoolRole = "prefill" | "decode";

export interface TargetEndpoint {
  model: ModelName;
  gpu: GpuType;
  /** The pool of a disaggregated model the counts are for (each pool has its own target); absent = colocated. */
  role?: PoolRole;
  /** Instances planned for the hour (covers the forecast's upper bound when the planner provisions for it). */
  instances: number;
  /**
   * Instances the point forecast alone needs (≤ instances): LT-U/LT-UA scale in toward it while utilization is low.
   * Absent (older planners) = instances.
   */
  floorInstances?: number;
  /**
   * The floor step by step through the hour: what the point forecast of each forecast step (`floorStepMs` long; step
   * 0 is the `floorStepMs`-aligned window holding `madeAtMs`) needs, each ≤ floorInstances. `lt-hpa` holds at least the steps ahead of it by the endpoint's
   * scale-out time (a forecast ramp is pre-scaled). Absent (older planners, no forecast) = floorInstances throughout.
   */
  floorSteps?: number[];
  /** The same steps for the forecast's 90% upper bound (≤ instances); absent = floorSteps. */
  upperSteps?: number[];
  floorStepMs?: number;
  /**
   * The forecast's demand per step (tokens/s + the NIW buffer; the same steps as `floorSteps`): the point forecast and
   * its 10% and 90% bounds, the band `predictive-hpa` places its floor in. Absent = no forecast steps.
   */
  demandSteps?: DemandStep[];
  /** The point forecast of the hour's peak tokens/s (+ NIW buffer); LT-UA compares observed traffic with it. */
  forecastTokensPerS: number;
}

export interface TargetsAck {
  region: RegionName;
  decisionId: number;
  /** False when the region already holds a newer decision (stale plans are ignored). */
  accepted: boolean;
}

export type Unsubscribe = () => void;

/** One instance in a region's listing (`GET /admin/regions/{region}/instances`). */
export interface InstanceListingEntry {
  id: string;
  model: ModelName;
  gpu: GpuType;
  gpus: number;
  state: InstanceState;
  /** The node (agent) it runs on; "" for a static region's engines. */
  node: string;
  /** When it entered its state (region clock, ms since the epoch). */
  enteredAtMs: number;
  /** How long it has been in that state when the listing was made (ms of the region clock). */
  forMs: number;
  /** What it is doing, or why it failed. */
  detail: string;
  url: string;
  /** Its role in prefill/decode disaggregation (Engine.role): "both" for an instance that serves plain requests. */
  role: "prefill" | "decode" | "both";
}

/** A region's listing: instances, nodes, recent scaling failures and actions. */
export interface RegionInstances {
  region: RegionName;
  actuator: "agents" | "static" | "sim";
  instances: InstanceListingEntry[];
  nodes: { nodeId: string; lost: boolean; lastSeenAtMs: number; gpuType: string; gpuSlots: number; freeSlots: number; memoryBytes: number; data: string; transport: string; models: string[]; completeModels: string[] }[];
  failures: { atMs: number; model: string; gpu: string; node: string; instanceId: string; message: string }[];
  /** Recent scaling steps; `role`: the pool of a disaggregated model the step was for (absent: colocated). */
  actions: { atMs: number; model: string; gpu: string; role?: PoolRole; kind: string; instanceId: string; reason: string; from: number; desired: number }[];
}

/**
 * What a region reports of one request sent in callback shape (RegionLink.submit), at its clock times: the engine's
 * callbacks (RequestCallbacks) plus, from adapters that carry them, the output text and the finish. Called as
 * methods, so one object per request suffices.
 */
export interface LinkCallbacks extends RequestCallbacks {
  /** A piece of output text and the tokens it carries (≥ 1); only from adapters that carry text (streaming links). */
  onToken?(text: string, tokens: number): void;
  /** The region's finish reason and usage, just before `onDone`; only from adapters that carry them. */
  onFinish?(reason: FinishReason, usage: Usage): void;
}

/**
 * Global ↔ region. Adapters: in-process (same object graph, used by `dev` and replay) and gRPC (separate processes).
 * `dispatch` streams the request's events; it throws a TidegateError (upstream_error / no_region_available) when the
 * region fails before the first token.
 */
export interface RegionLink {
  readonly region: RegionName;
  /**
   * Telemetry snapshots as they arrive. `onDown` (optional) is called when the link learns that the region is gone
   * (its telemetry stream broke); the next snapshot means it is back.
   */
  subscribe(onTelemetry: (t: RegionTelemetry) => void, onDown?: () => void): Unsubscribe;
  /** The request's events as a stream the caller pulls (tests, tools; core/push.ts streamOf over `open` where there is one). */
  dispatch(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<EngineEvent>;
  /**
   * Optional push form of `dispatch` (core/push.ts), which the HTTP relay uses where present: each event handed to
   * `sink` as the link delivers it, no promise per token; failures (refusals included) reach `sink.fail`; `sink.event`
   * returning false pauses the region's stream until the returned flow resumes. The gRPC and in-process links have it.
   */
  open?(req: GenerateRequest, sink: EventSink, signal?: AbortSignal): Flow;
  /**
   * The callback shape of `dispatch`: the same request, its progress reported through `callbacks` instead of a
   * stream the caller pulls (the batch Dispatcher; router/relay.ts `submitWithRetry`). A refusal the adapter knows
   * at once is thrown (a TidegateError: no_region_available when nothing serves the model there, a 4xx for the
   * request itself); a failure after that reaches `onError`, and so does aborting `signal`. Adapters over a stream
   * (gRPC, in-process) report the text (`onToken`) and the finish (`onFinish`); an adapter that enters a region's
   * callback form on the caller's clock (the replays' links, sim/replay/callback-link.ts) reports counts only, with
   * no promise per request.
   */
  submit(req: GenerateRequest, callbacks: LinkCallbacks, signal?: AbortSignal): void;
  sendTargets(targets: RegionTargets): Promise<TargetsAck>;
  /** The region's instances, nodes and recent scaling events (admin listing). */
  instances(): Promise<RegionInstances>;
  close(): Promise<void>;
}
