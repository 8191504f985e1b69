/**
 * What a pipelined instance reports of its split over stages (QUART key-stage scaling; the engine itself is
 * region/keystage/pipeline-engine.ts `PipelineEngine`, above this folder): the summary the region's listing shows, and
 * the gauge names a pipelined engine-sim adds to /metrics (sim/engine-metrics.ts writes them, the openai-http adapter
 * reads them back). Here so that the engines that serve or scrape a pipelined instance need nothing from keystage.
 */

/**
 * A pipelined instance's split now: a PipelineEngine's own `status()` (which carries more), or what the openai-http
 * adapter reads back from a pipelined engine-sim's /metrics (`PIPELINE_METRICS`).
 */
export interface PipelineSummary {
  /** region/keystage/corrector.ts ScalingMode: stages scaled one by one, or all together. */
  mode: "key-stage" | "whole-pipeline";
  budgetGpus: number;
  heldGpus: number;
  stages: { replicas: number; starting: number; queue: number; key: boolean }[];
  /** `removedStarting`: of `removed`, replicas removed while starting (their start given up); absent where not reported (the /metrics adapter). */
  scaler: { added: number; removed: number; removedStarting?: number };
  /** Stage processes (keystage.stageProcesses, region/keystage/staged-engine.ts): each replica's stage, node, pid, state. */
  processes?: { stage: number; node: string; pid: number; state: string }[];
}

/** The gauges a pipelined engine-sim adds to /metrics (sim/engine-metrics.ts); model_name on each. */
export const PIPELINE_METRICS = {
  /** {stage, state: serving|starting} */
  stageReplicas: "tidegate_pipeline_stage_replicas",
  /** {stage} */
  stageQueue: "tidegate_pipeline_stage_queue",
  /** {stage}: 1 while the stage is key (QUART §5.1), else 0 */
  stageKey: "tidegate_pipeline_stage_key",
  gpusHeld: "tidegate_pipeline_gpus_held",
  gpusBudget: "tidegate_pipeline_gpus_budget",
  /** {mode}: 1 */
  info: "tidegate_pipeline_info",
  replicasAdded: "tidegate_pipeline_replicas_added_total",
  replicasRemoved: "tidegate_pipeline_replicas_removed_total",
} as const;
