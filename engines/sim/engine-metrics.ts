/**
 * vLLM's Prometheus metric names for `tidegate engine-sim`, so scrapers (and the openai-http adapter) read it as
 * they read vLLM: KV usage, running/waiting, TTFT and inter-token histograms, token counters. Label `model_name`
 * as vLLM does. Gauges are read from the engine at scrape time.
 */
import { Counter, Gauge, Histogram, createRegistry, initLabels, type Registry } from "../../core/metrics.js";
import type { EngineStats } from "../../core/ports.js";
import { PIPELINE_METRICS, type PipelineSummary } from "../pipeline-summary.js";

/** The gauge names the openai-http adapter scrapes (vLLM ≥ 0.7 names; `gpu_cache_usage_perc` is the older one). */
export const VLLM_METRICS = {
  kvUsage: "vllm:kv_cache_usage_perc",
  kvUsageLegacy: "vllm:gpu_cache_usage_perc",
  running: "vllm:num_requests_running",
  waiting: "vllm:num_requests_waiting",
  /** vLLM's counter of preempted requests. */
  preemptions: "vllm:num_preemptions_total",
  /**
   * engine-sim only (vLLM has no such gauge): the share of the KV cache that running batch (priority 1) requests
   * hold, which a priority 0 request may preempt (EngineStats.preemptibleKvBytes); absent when it does not preempt.
   */
  kvPreemptible: "tidegate_kv_cache_preemptible_perc",
  /** vLLM's prefix-cache counters (V1): prompt tokens looked up in the prefix cache, and of them found cached. */
  prefixQueries: "vllm:prefix_cache_queries_total",
  prefixHits: "vllm:prefix_cache_hits_total",
  /**
   * engine-sim's host-memory KV tier (prefix-cache.ts; LMCache / vLLM CPU offloading), beside vLLM's GPU-only counters
   * above: prompt tokens looked up there (past the GPU hit), and of them found there and loaded, not recomputed.
   */
  hostKvQueries: "tidegate_host_kv_cache_queries_total",
  hostKvHits: "tidegate_host_kv_cache_hits_total",
} as const;

const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const TPOT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
/** A KV pull: a few ms for a short prompt on a fast link to seconds for a long one on a shaped one (the pull's 30 s limit). */
const KV_TRANSFER_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920];

/** The metrics of one engine-sim process. `stats` is read at each scrape. */
export class EngineSimMetrics {
  readonly registry: Registry;
  readonly ttftSeconds: Histogram<"model_name">;
  readonly tpotSeconds: Histogram<"model_name">;
  readonly interTokenSeconds: Histogram<"model_name">;
  readonly e2eSeconds: Histogram<"model_name">;
  readonly promptTokens: Counter<"model_name">;
  readonly generationTokens: Counter<"model_name">;
  readonly requestSuccess: Counter<"model_name" | "finished_reason">;
  readonly labels: { model_name: string };
  /** `tidegate_kv_transfer_seconds`, once a KV transfer was asked for (`kvTransfers`). */
  kvTransferSeconds: Histogram<"model_name"> | undefined;

  /**
   * `processMetrics` adds the process's standard metrics (prom-client defaults). `pipeline` (a pipelined instance,
   * region/keystage/pipeline-engine.ts) adds the PIPELINE_METRICS: replicas (serving, starting), queue and key flag per stage,
   * GPUs held of the budget, the scaling mode, and replicas added and removed.
   */
  constructor(model: string, stats: () => EngineStats, processMetrics = false, pipeline?: () => PipelineSummary) {
    this.registry = createRegistry(processMetrics);
    this.labels = { model_name: model };
    const registers = [this.registry];
    const gauge = (name: string, help: string, read: (s: EngineStats) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["model_name"],
        registers,
        collect() {
          this.set({ model_name: model }, read(stats()));
        },
      });
    const total = (name: string, help: string, read: () => number) => this.readAtScrape(name, help, read);
    const kv = (s: EngineStats) => (s.kvBytesCapacity > 0 ? s.kvBytesUsed / s.kvBytesCapacity : 0);
    gauge(VLLM_METRICS.kvUsage, "KV-cache usage. 1 means 100 percent usage.", kv);
    gauge(VLLM_METRICS.kvUsageLegacy, "KV-cache usage (pre-0.7 name). 1 means 100 percent usage.", kv);
    gauge(VLLM_METRICS.running, "Number of requests in model execution batches.", (s) => s.running);
    gauge(VLLM_METRICS.waiting, "Number of requests waiting to be processed.", (s) => s.waiting);
    if (stats().preemptibleKvBytes !== undefined) {
      gauge(VLLM_METRICS.kvPreemptible, "Share of the KV cache held by running priority 1 (batch) requests, which a priority 0 request may preempt.", (s) => (s.kvBytesCapacity > 0 ? (s.preemptibleKvBytes ?? 0) / s.kvBytesCapacity : 0));
      new Counter({
        name: VLLM_METRICS.preemptions,
        help: "Cumulative number of preemptions from the engine.",
        labelNames: ["model_name"],
        registers,
        collect() {
          this.reset();
          this.inc({ model_name: model }, stats().preemptionsTotal ?? 0);
        },
      });
    }
    if (stats().prefixQueriedTokensTotal !== undefined) {
      total(VLLM_METRICS.prefixQueries, "Prefix cache queries, in terms of number of queried tokens.", () => stats().prefixQueriedTokensTotal ?? 0);
      total(VLLM_METRICS.prefixHits, "Prefix cache hits, in terms of number of cached tokens.", () => stats().prefixHitTokensTotal ?? 0);
    }
    if (stats().hostKvQueriedTokensTotal !== undefined) {
      total(VLLM_METRICS.hostKvQueries, "Host KV tier queries, in prompt tokens past the GPU prefix-cache hit.", () => stats().hostKvQueriedTokensTotal ?? 0);
      total(VLLM_METRICS.hostKvHits, "Host KV tier hits, in prompt tokens loaded from host memory instead of recomputed.", () => stats().hostKvHitTokensTotal ?? 0);
    }
    if (pipeline !== undefined) {
      const P = PIPELINE_METRICS;
      const perStage = (name: string, help: string, set: (g: Gauge<string>, st: PipelineSummary["stages"][number], stage: string) => void, extra: string[] = []) =>
        new Gauge({
          name,
          help,
          labelNames: ["model_name", "stage", ...extra],
          registers,
          collect() {
            pipeline().stages.forEach((st, i) => set(this, st, String(i)));
          },
        });
      perStage(P.stageReplicas, "Replicas of each pipeline stage (key-stage scaling, QUART), serving or starting.", (g, st, stage) => {
        g.set({ model_name: model, stage, state: "serving" }, st.replicas);
        g.set({ model_name: model, stage, state: "starting" }, st.starting);
      }, ["state"]);
      perStage(P.stageQueue, "Requests waiting at each pipeline stage.", (g, st, stage) => g.set({ model_name: model, stage }, st.queue));
      perStage(P.stageKey, "1 while the stage is a key stage (its M/M/c delay above target), else 0.", (g, st, stage) => g.set({ model_name: model, stage }, st.key ? 1 : 0));
      gauge(P.gpusHeld, "GPUs the pipelined instance holds (of its budget).", () => pipeline().heldGpus);
      gauge(P.gpusBudget, "GPUs of the pipelined instance: the budget key-stage scaling splits over stages.", () => pipeline().budgetGpus);
      new Gauge({
        name: P.info,
        help: "The pipelined instance's scaling mode (key-stage or whole-pipeline), as a label; always 1.",
        labelNames: ["model_name", "mode"],
        registers,
        collect() {
          this.reset();
          this.set({ model_name: model, mode: pipeline().mode }, 1);
        },
      });
      const counter = (name: string, help: string, read: (s: PipelineSummary) => number) => total(name, help, () => read(pipeline()));
      counter(P.replicasAdded, "Stage replicas the key-stage scaler started.", (s) => s.scaler.added);
      counter(P.replicasRemoved, "Stage replicas the key-stage scaler stopped.", (s) => s.scaler.removed);
    }
    const hist = (name: string, help: string, buckets: number[]) => new Histogram({ name, help, labelNames: ["model_name"], buckets, registers });
    this.ttftSeconds = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS);
    this.tpotSeconds = hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", TPOT_BUCKETS);
    this.interTokenSeconds = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", TPOT_BUCKETS);
    this.e2eSeconds = hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", E2E_BUCKETS);
    for (const h of [this.ttftSeconds, this.tpotSeconds, this.interTokenSeconds, this.e2eSeconds]) h.zero(this.labels);
    this.promptTokens = new Counter({ name: "vllm:prompt_tokens_total", help: "Number of prefill tokens processed.", labelNames: ["model_name"], registers });
    this.generationTokens = new Counter({ name: "vllm:generation_tokens_total", help: "Number of generation tokens processed.", labelNames: ["model_name"], registers });
    this.requestSuccess = new Counter({ name: "vllm:request_success_total", help: "Count of successfully processed requests.", labelNames: ["model_name", "finished_reason"], registers });
    initLabels(this.promptTokens, { model_name: [model] });
    initLabels(this.generationTokens, { model_name: [model] });
    initLabels(this.requestSuccess, { model_name: [model], finished_reason: ["stop", "length", "abort"] });
  }

  /** Records one finished (or aborted) request: times in ms from arrival; `gapsMs` the inter-token gaps. */
  /**
   * Prefill/decode KV transfers (kv-transfer.ts), from its totals at each scrape: bytes sent to decode instances and
   * received from prefill instances, pulls that failed, held KV dropped unsent; and the time of each pull
   * (`kvTransferSeconds`). Added when the first transfer is asked.
   */
  kvTransfers(read: () => { sentBytes: number; receivedBytes: number; failed: number; dropped: number }): void {
    this.kvTransferSeconds ??= new Histogram({ name: "tidegate_kv_transfer_seconds", help: "Time a decode instance took to pull a request's KV from its prefill instance (prefill/decode disaggregation).", labelNames: ["model_name"], buckets: KV_TRANSFER_BUCKETS, registers: [this.registry] });
    const total = (name: string, help: string, pick: (t: ReturnType<typeof read>) => number) => this.readAtScrape(name, help, () => pick(read()));
    total("tidegate_kv_transfer_sent_bytes_total", "KV bytes sent to decode instances (prefill/decode disaggregation).", (t) => t.sentBytes);
    total("tidegate_kv_transfer_received_bytes_total", "KV bytes received from prefill instances (prefill/decode disaggregation).", (t) => t.receivedBytes);
    total("tidegate_kv_transfer_failed_total", "KV pulls from prefill instances that failed.", (t) => t.failed);
    total("tidegate_kv_transfer_dropped_total", "Held KV dropped before a decode instance pulled it (the byte bound).", (t) => t.dropped);
  }

  /** A counter whose value is read at each scrape (a total the engine keeps). */
  private readAtScrape(name: string, help: string, read: () => number): Counter<"model_name"> {
    const labels = this.labels;
    return new Counter({
      name,
      help,
      labelNames: ["model_name"],
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(labels, read());
      },
    });
  }

  observeRequest(r: { ttftMs: number | undefined; e2eMs: number; promptTokens: number; outputTokens: number; gapsMs: number[]; finishedReason: "stop" | "length" | "abort" }): void {
    const l = this.labels;
    if (r.ttftMs !== undefined) this.ttftSeconds.observe(l, r.ttftMs / 1000);
    for (const g of r.gapsMs) {
      this.tpotSeconds.observe(l, g / 1000);
      this.interTokenSeconds.observe(l, g / 1000);
    }
    this.e2eSeconds.observe(l, r.e2eMs / 1000);
    this.promptTokens.inc(l, r.promptTokens);
    this.generationTokens.inc(l, r.outputTokens);
    this.requestSuccess.inc({ ...l, finished_reason: r.finishedReason });
  }
}
