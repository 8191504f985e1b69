/**
 * The oracle forecaster (issue 31's bound): the week replay's planner given the true interactive demand of each
 * coming hour instead of a forecast. Same planner, ILP and strategy; only the forecaster differs, so the gap between
 * a strategy and its oracle arm is what better forecasting could still save.
 *
 * Truth: the workload's own arrivals, prompt + output tokens per minute per (model, client region), from one pass
 * over the same seeded stream before the run (what the recorders would write if every request were served in its
 * client region: the router keeps a region's own traffic while it is under its threshold, SageServe §6.2). A
 * forecast from `fromMs` is the mean tokens/s of each coming 10-minute step; the peak is the largest step; the
 * interval is the point itself (the oracle is certain).
 */
import type { Band, Forecast, ForecastInput, Forecaster } from "../../forecasts/forecaster.js";
import { WorkloadStream } from "../workload/generator.js";
import type { WorkloadSpec } from "../workload/spec.js";

const MINUTE = 60_000;

/** Per (model, region) tokens/s of every minute of the run, interactive only. */
export function trueDemand(workload: WorkloadSpec): Map<string, Float64Array> {
  const stream = new WorkloadStream(workload);
  const minutes = Math.ceil((workload.days * 86_400_000) / MINUTE) + 120;
  const out = new Map<string, Float64Array>();
  const arrays = workload.models.map((m) => workload.regions.map((r) => {
    const a = new Float64Array(minutes);
    out.set(`${m.name}\t${r.name}`, a);
    return a;
  }));
  for (let a = stream.next(); a !== undefined; a = stream.next()) {
    if (a.niw) continue;
    const k = Math.floor(a.atMs / MINUTE);
    if (k < minutes) arrays[a.model]![a.region]![k]! += (a.promptTokens + a.outputTokens) / 60;
  }
  return out;
}

export class OracleForecaster implements Forecaster {
  readonly name = "oracle";

  constructor(private readonly truth: ReadonlyMap<string, Float64Array>) {}

  async forecast(input: ForecastInput): Promise<Forecast> {
    const id = input.series;
    const series = id === undefined ? undefined : this.truth.get(`${id.model}\t${id.region}`);
    if (id === undefined || series === undefined) throw new Error("the oracle knows only the replay's own (model, region) series");
    const per = Math.max(1, Math.round(input.stepMs / MINUTE));
    const first = Math.floor(id.fromMs / MINUTE);
    const steps: Band[] = [];
    for (let k = 0; k < input.horizonSteps; k++) {
      let sum = 0;
      for (let j = 0; j < per; j++) sum += series[first + k * per + j] ?? 0;
      const mean = sum / per;
      steps.push({ mean, lower: mean, upper: mean });
    }
    let peak = steps[0]!;
    for (const s of steps) if (s.mean > peak.mean) peak = s;
    return { steps, peak: { ...peak }, method: "oracle" };
  }

  async close(): Promise<void> {}
}
