/**
 * Fits every (model, GPU, TP) on the training runs, derives the GPU/model pairs that were never measured, and
 * reports the held-out error (fit.ts explains the split). Used by generate.ts (writes fitted.ts), the perf test and
 * `npm run bench:replay`.
 */
import type { MeasuredRow } from "./data.js";
import { errorOn, fitProfile, gpuRatios, groupRows, isHeldOut, profileKey, scaleProfile, type ProfileFit } from "./fit.js";

export interface HeldOutError {
  key: string;
  ttftMape: number;
  tpotMape: number;
  ttftRows: number;
  tpotRows: number;
}

export interface FitReport {
  profiles: ProfileFit[];
  perProfile: HeldOutError[];
  /** Row-weighted MAPE over every held-out run (fractions, 0.03 = 3%). */
  ttftMape: number;
  tpotMape: number;
  heldOutRows: number;
  trainRows: number;
}

/**
 * GPUs a model must have a profile for, and the reference model used to scale a missing one: Llama-3 models were
 * profiled on A100 only, so their H100 profiles are the A100 fit × the H100/A100 ratio llama2-70b shows at the
 * same TP (the only model measured on both GPUs at TP 2 and 4; a dense decoder in the same vLLM stack, so prefill
 * (compute-bound) and decode (bandwidth-bound) scale with the GPU, not the model).
 */
const DERIVE: { model: string; from: string; to: string; reference: string }[] = [
  { model: "llama3.1-8b", from: "a100-80gb", to: "h100-80gb", reference: "llama2-70b" },
  { model: "llama3.2-3b", from: "a100-80gb", to: "h100-80gb", reference: "llama2-70b" },
];

/** Fits every measured group on its training runs and derives the missing GPU profiles. */
export function fitAll(rows: readonly MeasuredRow[]): FitReport {
  const groups = groupRows(rows);
  const profiles: ProfileFit[] = [];
  const perProfile: HeldOutError[] = [];
  let pe = 0;
  let pn = 0;
  let de = 0;
  let dn = 0;
  let heldOutRows = 0;
  let trainRows = 0;
  for (const [key, g] of [...groups.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const train = g.filter((r) => !isHeldOut(r));
    const test = g.filter(isHeldOut);
    trainRows += train.length;
    heldOutRows += test.length;
    const fit = fitProfile(train);
    profiles.push(fit);
    const e = errorOn(fit, test);
    perProfile.push({ key, ...e });
    pe += e.ttftMape * e.ttftRows;
    pn += e.ttftRows;
    de += e.tpotMape * e.tpotRows;
    dn += e.tpotRows;
  }
  const byKey = new Map(profiles.map((p) => [profileKey(p.model, p.gpu, p.tp), p]));
  for (const d of DERIVE) {
    for (const base of profiles.filter((p) => p.model === d.model && p.gpu === d.from)) {
      if (byKey.has(profileKey(d.model, d.to, base.tp))) continue;
      const refFrom = byKey.get(profileKey(d.reference, d.from, base.tp));
      const refTo = byKey.get(profileKey(d.reference, d.to, base.tp));
      if (refFrom === undefined || refTo === undefined) continue;
      const { prefillRatio, decodeRatio } = gpuRatios(refFrom, refTo);
      const source = `derived: ${d.model} ${d.from} TP${base.tp} × ${d.reference} ${d.to}/${d.from} TP${base.tp} ratios (prefill ${prefillRatio.toFixed(3)}, decode ${decodeRatio.toFixed(3)})`;
      const derived = scaleProfile(base, d.to, prefillRatio, decodeRatio, source);
      profiles.push(derived);
      byKey.set(profileKey(d.model, d.to, base.tp), derived);
    }
  }
  return { profiles, perProfile, ttftMape: pn ? pe / pn : 0, tpotMape: dn ? de / dn : 0, heldOutRows, trainRows };
}

/**
 * The harsher check: for each measured configuration, fit on every other configuration's runs and predict this
 * one (interpolation between sweep points). Row-weighted MAPE as fractions.
 */
export function leaveConfigOut(rows: readonly MeasuredRow[]): { ttftMape: number; tpotMape: number } {
  let pe = 0;
  let pn = 0;
  let de = 0;
  let dn = 0;
  for (const g of groupRows(rows).values()) {
    const configs = new Map<string, MeasuredRow[]>();
    for (const r of g) {
      const k = `${r.promptTokens}|${r.batch}|${r.outputTokens}`;
      configs.set(k, [...(configs.get(k) ?? []), r]);
    }
    for (const [k, test] of configs) {
      const train = g.filter((r) => `${r.promptTokens}|${r.batch}|${r.outputTokens}` !== k);
      const e = errorOn(fitProfile(train), test);
      pe += e.ttftMape * e.ttftRows;
      pn += e.ttftRows;
      de += e.tpotMape * e.tpotRows;
      dn += e.tpotRows;
    }
  }
  return { ttftMape: pn ? pe / pn : 0, tpotMape: dn ? de / dn : 0 };
}
