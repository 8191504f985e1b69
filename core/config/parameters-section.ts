/** The `parameters` section: the parameter pool and multicast (DESIGN "Fast in-region scaling"). */
import { ObjectReader } from "../validate.js";
import type { ModelName } from "../models.js";
import type { ModelConfig } from "./models-section.js";

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

/** Reads the `parameters` object; every configured model gets an entry (defaults: DEFAULT_PARAMETER_BYTES, origin "pattern", seed = its index + 1). */
export function parseParameters(r: ObjectReader, models: readonly ModelConfig[]): ParametersConfig {
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
