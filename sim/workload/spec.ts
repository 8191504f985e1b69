/**
 * The week workload's description (a JSON file, or `DEFAULT_WORKLOAD`), validated against the fleet: every
 * workload model must be hosted by some region, every client region must exist. Errors are ValidationErrors that
 * name the field (`models[2].name`, `regions[0].clientShare`).
 */
import { join } from "node:path";
import { defaultDataDir } from "../../core/paths.js";
import type { TidegateConfig } from "../../core/config.js";
import { MODEL_SPECS } from "../../core/models.js";
import { ObjectReader, ValidationError } from "../../core/validate.js";

/** Where one model's interactive traffic comes from. */
export interface WorkloadModel {
  name: string;
  /** ServeGen source folder under the data root, e.g. `language/m-mid`. */
  source: string;
  /** Take every `clientStride`-th client starting at `clientOffset` (lets two models split one source). */
  clientStride: number;
  clientOffset: number;
  /** Share of the week's interactive requests this model gets (shares are normalised). */
  share: number;
  /** Which Azure 2023 trace the token lengths come from. */
  tokens: "conv" | "code";
}

export interface WorkloadRegion {
  name: string;
  /** Share of clients living in this region (normalised). */
  clientShare: number;
  /** Clients' local time = UTC + this; their ServeGen series is read in local time. */
  utcOffsetH: number;
}

/** An injected burst: client rates × factor during [startMs, startMs + durationMs) for matching model/region. */
export interface WorkloadBurst {
  startMs: number;
  durationMs: number;
  factor: number;
  model?: string;
  region?: string;
}

export interface WorkloadSpec {
  seed: number;
  /** Length of the replay in days (virtual time starts at UTC midnight of ServeGen day `startDay`). */
  days: number;
  startDay: number;
  /** Interactive + batch requests over the whole run (the generator scales client rates to match). */
  targetRequests: number;
  servegenDir: string;
  azureDir: string;
  regions: WorkloadRegion[];
  models: WorkloadModel[];
  /** Batch (NIW) share of all tokens; submitted as a steady Poisson stream per model; deadline per request. */
  niwTokenShare: number;
  niwDeadlineMs: number;
  bursts: WorkloadBurst[];
  /**
   * Per model, the client rate scale to use instead of scaling to `targetRequests` (WorkloadStream): a window of a
   * longer run (days 3–7 of the seeded week) keeps the whole run's rate. Not read from workload files.
   */
  rateScale?: number[];
}

/** `servegenDir` and `azureDir` in a data folder laid out as core/data/README.txt says (`--data-dir`). */
export function workloadDataDirs(dataDir: string): { servegenDir: string; azureDir: string } {
  return { servegenDir: join(dataDir, "servegen/data"), azureDir: join(dataDir, "azure_llm_2023") };
}

/** The default week: 3 US regions, 4 models from ServeGen's language series, ≈10M requests. */
export const DEFAULT_WORKLOAD_JSON = {
  seed: 42,
  days: 7,
  startDay: 1,
  targetRequests: 10_000_000,
  // The shipped data folder (core/data: the Azure traces, not ServeGen's per-client series); --data-dir or a
  // workload file names a full one.
  ...workloadDataDirs(defaultDataDir()),
  regions: [
    { name: "us-east", clientShare: 0.4, utcOffsetH: -5 },
    { name: "us-central", clientShare: 0.3, utcOffsetH: -6 },
    { name: "us-west", clientShare: 0.3, utcOffsetH: -8 },
  ],
  models: [
    { name: "llama2-70b", source: "language/m-mid", share: 0.45, tokens: "conv" },
    { name: "bloom-176b", source: "language/m-large", share: 0.25, tokens: "conv" },
    { name: "llama3.1-8b", source: "language/m-small", clientStride: 2, clientOffset: 0, share: 0.18, tokens: "code" },
    { name: "llama3.2-3b", source: "language/m-small", clientStride: 2, clientOffset: 1, share: 0.12, tokens: "conv" },
  ],
  niwTokenShare: 0.1,
  niwDeadlineMs: 24 * 3600_000,
  bursts: [],
};

/** Parses and checks a workload against the fleet. */
export function parseWorkload(json: unknown, fleet: TidegateConfig): WorkloadSpec {
  const r = new ObjectReader(json, "");
  const seed = r.number("seed", 42, { integer: true, min: 0 });
  const days = r.number("days", 7, { gt: 0, max: 13 });
  const startDay = r.number("startDay", 1, { integer: true, min: 1, max: 13 });
  if (startDay + days > 14) r.fail("days", `startDay + days must be ≤ 14 (ServeGen holds 14 days), got ${startDay + days}`);
  const targetRequests = r.number("targetRequests", 10_000_000, { integer: true, min: 1 });
  const servegenDir = r.string("servegenDir", DEFAULT_WORKLOAD_JSON.servegenDir);
  const azureDir = r.string("azureDir", DEFAULT_WORKLOAD_JSON.azureDir);
  const fleetRegions = new Set(fleet.regions.map((x) => x.name));
  const regions = r.array("regions", (v, path) => {
    const o = new ObjectReader(v, path);
    const name = o.string("name");
    if (!fleetRegions.has(name)) o.fail("name", `region ${JSON.stringify(name)} is not in the fleet (${[...fleetRegions].join(", ")})`);
    const out = { name, clientShare: o.number("clientShare", undefined, { gt: 0 }), utcOffsetH: o.number("utcOffsetH", undefined, { integer: true, min: -12, max: 14 }) };
    o.done();
    return out;
  }, undefined, { minLength: 1 });
  const models = r.array("models", (v, path) => {
    const o = new ObjectReader(v, path);
    const name = o.string("name");
    if (MODEL_SPECS[name] === undefined) o.fail("name", `unknown model ${JSON.stringify(name)}`);
    if (!fleet.regions.some((reg) => reg.endpoints.some((e) => e.model === name))) o.fail("name", `model ${JSON.stringify(name)} has no region in the fleet that hosts it`);
    const out: WorkloadModel = {
      name,
      source: o.string("source"),
      clientStride: o.number("clientStride", 1, { integer: true, min: 1 }),
      clientOffset: o.number("clientOffset", 0, { integer: true, min: 0 }),
      share: o.number("share", undefined, { gt: 0 }),
      tokens: o.string("tokens", "conv", { oneOf: ["conv", "code"] }) as "conv" | "code",
    };
    if (out.clientOffset >= out.clientStride) o.fail("clientOffset", `must be < clientStride (${out.clientStride})`);
    o.done();
    return out;
  }, undefined, { minLength: 1 });
  models.forEach((m, i) => {
    if (models.findIndex((x) => x.name === m.name) !== i) throw new ValidationError(`models[${i}].name`, `duplicate model ${JSON.stringify(m.name)}`);
  });
  const niwTokenShare = r.number("niwTokenShare", 0.1, { min: 0, max: 0.9 });
  const niwDeadlineMs = r.number("niwDeadlineMs", 24 * 3600_000, { gt: 0 });
  const bursts = r.array("bursts", (v, path) => {
    const o = new ObjectReader(v, path);
    const b: WorkloadBurst = { startMs: o.number("startMs", undefined, { min: 0 }), durationMs: o.number("durationMs", undefined, { gt: 0 }), factor: o.number("factor", undefined, { gt: 0, max: 1000 }) };
    const model = o.optionalString("model");
    const region = o.optionalString("region");
    if (model !== undefined && !models.some((m) => m.name === model)) o.fail("model", `not a workload model: ${JSON.stringify(model)}`);
    if (region !== undefined && !regions.some((x) => x.name === region)) o.fail("region", `not a workload region: ${JSON.stringify(region)}`);
    o.done();
    return { ...b, ...(model === undefined ? {} : { model }), ...(region === undefined ? {} : { region }) };
  }, []);
  r.done();
  return { seed, days, startDay, targetRequests, servegenDir, azureDir, regions, models, niwTokenShare, niwDeadlineMs, bursts };
}
