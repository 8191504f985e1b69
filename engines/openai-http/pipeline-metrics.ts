/**
 * A pipelined engine-sim's split over its stages, read back from its /metrics text (`PIPELINE_METRICS`, written by
 * engines/sim/engine-metrics.ts): what the openai-http adapter reports as `pipelineSummary()`.
 */
import { PIPELINE_METRICS, type PipelineSummary } from "../pipeline-summary.js";
import { promSamples, promValue } from "./sse.js";

/** A pipelined engine's split over its stages read from its /metrics text; undefined for any other engine. */
export function pipelineFromMetrics(text: string): PipelineSummary | undefined {
  const P = PIPELINE_METRICS;
  const budget = promValue(text, P.gpusBudget);
  if (budget === undefined) return undefined;
  const stages: PipelineSummary["stages"] = [];
  const at = (labels: Record<string, string>) => {
    const i = Number(labels.stage);
    if (!Number.isInteger(i) || i < 0 || i > 1024) return undefined;
    while (stages.length <= i) stages.push({ replicas: 0, starting: 0, queue: 0, key: false });
    return stages[i];
  };
  for (const s of promSamples(text, P.stageReplicas)) {
    const st = at(s.labels);
    if (st !== undefined && s.labels.state === "starting") st.starting = s.value;
    else if (st !== undefined) st.replicas = s.value;
  }
  for (const s of promSamples(text, P.stageQueue)) {
    const st = at(s.labels);
    if (st !== undefined) st.queue = s.value;
  }
  for (const s of promSamples(text, P.stageKey)) {
    const st = at(s.labels);
    if (st !== undefined) st.key = s.value > 0;
  }
  const mode = promSamples(text, P.info).find((s) => s.value > 0)?.labels.mode === "whole-pipeline" ? "whole-pipeline" : "key-stage";
  return {
    mode,
    budgetGpus: budget,
    heldGpus: promValue(text, P.gpusHeld) ?? 0,
    stages,
    scaler: { added: promValue(text, P.replicasAdded) ?? 0, removed: promValue(text, P.replicasRemoved) ?? 0 },
  };
}
