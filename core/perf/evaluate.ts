/**
 * Fits every (model, GPU, TP) on the training runs, derives the GPU/model pairs that were never measured, and
 * reports the held-out error (fit.ts explains the split). Used by generate.ts (writes fitted.ts), the perf test and
 * `npm run bench:replay`.
 */
import type { MeasuredRow } from "./data.js";
import { DEFAULT_FIT, errorOn, fitProfile, gpuRatios, groupRows, isHeldOut, profileKey, rawPrefillCurves, scaleProfile, type FitOptions, type PrefillCurves, type ProfileFit } from "./fit.js";

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
  /** Row-weighted MAPE over every held-out run (fractions, 0.03 = 3%); NaN when no run was held out (no data). */
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

/** Error figures of some rows (errorOn's shape, fractions). */
export type RowErrors = Omit<HeldOutError, "key">;

/**
 * Row-weighted MAPE over several scored groups: `add` each group's errors (a group with no rows adds nothing, its
 * NaN included); `total()` is NaN where no row was scored (no data, never 0).
 */
export class RowWeighted {
  private pe = 0;
  private pn = 0;
  private de = 0;
  private dn = 0;

  add(e: RowErrors): void {
    if (e.ttftRows > 0) this.pe += e.ttftMape * e.ttftRows;
    this.pn += e.ttftRows;
    if (e.tpotRows > 0) this.de += e.tpotMape * e.tpotRows;
    this.dn += e.tpotRows;
  }

  total(): RowErrors {
    return { ttftMape: this.pn ? this.pe / this.pn : Number.NaN, tpotMape: this.dn ? this.de / this.dn : Number.NaN, ttftRows: this.pn, tpotRows: this.dn };
  }
}

/** Fits every measured group on its training runs and derives the missing GPU profiles. */
export function fitAll(rows: readonly MeasuredRow[]): FitReport {
  const groups = groupRows(rows);
  const profiles: ProfileFit[] = [];
  const perProfile: HeldOutError[] = [];
  const all = new RowWeighted();
  let heldOutRows = 0;
  let trainRows = 0;
  const sorted = [...groups.entries()].sort((a, b) => a[0].localeCompare(b[0]));
  const raw = new Map<string, PrefillCurves>(sorted.map(([key, g]) => [key, rawPrefillCurves(g.filter((r) => !isHeldOut(r)))]));
  for (const [key, g] of sorted) {
    const train = g.filter((r) => !isHeldOut(r));
    const test = g.filter(isHeldOut);
    trainRows += train.length;
    heldOutRows += test.length;
    const fit = fitProfile(train, peersOf(raw, key));
    profiles.push(fit);
    const e = errorOn(fit, test);
    perProfile.push({ key, ...e });
    all.add(e);
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
  const { ttftMape, tpotMape } = all.total();
  return { profiles, perProfile, ttftMape, tpotMape, heldOutRows, trainRows };
}

/** Every profile's raw prefill curves except `key`'s. */
export function peersOf(raw: ReadonlyMap<string, PrefillCurves>, key: string): PrefillCurves[] {
  return [...raw.entries()].filter(([k]) => k !== key).map(([, c]) => c);
}

/**
 * A configuration: one measured (prompt tokens, batch) point of one (model, GPU, TP), with every output length
 * measured there and every run. Output length is not part of it: prefill does not see it, so leaving out
 * (512, 1, 256 out) while (512, 1, 128 out) stays would leave the same prefill measurement in the fit.
 */
export function configKey(r: MeasuredRow): string {
  return `${profileKey(r.model, r.gpu, r.tp)}|p${r.promptTokens}|b${r.batch}`;
}

/** One profiler run setting (prompt, batch, output): the finer grouping the pre-issue-11 figure (6.18%) used. */
export function runSettingKey(r: MeasuredRow): string {
  return `${configKey(r)}|o${r.outputTokens}`;
}

export interface LeaveConfigOutReport {
  /** Row-weighted MAPE over every configuration, each predicted by a fit that never saw it (fractions; NaN: no rows). */
  ttftMape: number;
  tpotMape: number;
  ttftRows: number;
  tpotRows: number;
  configurations: number;
  /** Per configuration (the grouping's key), its error when left out. */
  perConfig: HeldOutError[];
  /** Per (model, GPU, TP), row-weighted over its configurations. */
  perProfile: HeldOutError[];
}

/**
 * Leave-one-configuration-out (LOCO): a configuration is one measured (prompt, batch) point of one (model, GPU, TP)
 * with all its output lengths and runs (`configKey`; 152 in the data). For each, the model is fitted on every other
 * run (the profile's other points, and the other profiles as peers for knot imputation, see fit.ts) and predicts
 * the left-out runs. Nothing of the left-out configuration enters its fit: not its other repeats or output lengths,
 * and not as a peer knot (peers are other profiles). Every run is used (no 5th-run split). Outlier rows (data.ts)
 * are neither fitted nor scored. `group` swaps the grouping (e.g. `runSettingKey`, for comparison only); `options`
 * the fit's choice (fit.ts FitOptions; the shipped one by default).
 */
export function leaveConfigOut(rows: readonly MeasuredRow[], group: (r: MeasuredRow) => string = configKey, options: FitOptions = DEFAULT_FIT): LeaveConfigOutReport {
  const groups = [...groupRows(rows).entries()].sort((a, b) => a[0].localeCompare(b[0]));
  const raw = new Map<string, PrefillCurves>(groups.map(([key, g]) => [key, rawPrefillCurves(g)]));
  const perConfig: HeldOutError[] = [];
  const perProfile: HeldOutError[] = [];
  const total = new RowWeighted();
  for (const [key, g] of groups) {
    const peers = peersOf(raw, key);
    const configs = new Map<string, MeasuredRow[]>();
    for (const r of g) configs.set(group(r), [...(configs.get(group(r)) ?? []), r]);
    const mine = new RowWeighted();
    for (const [k, test] of configs) {
      const e = errorOn(fitProfile(g.filter((r) => group(r) !== k), peers, options), test);
      perConfig.push({ key: k, ...e });
      mine.add(e);
      total.add(e);
    }
    perProfile.push({ key, ...mine.total() });
  }
  return {
    ...total.total(),
    configurations: perConfig.length,
    perConfig,
    perProfile,
  };
}

export interface DerivationCheck {
  /** The measured profile predicted, e.g. "bloom-176b/h100-80gb/tp8". */
  key: string;
  /** The reference model whose GPU ratios were applied to the target model's other-GPU fit. */
  reference: string;
  ttftMape: number;
  tpotMape: number;
}

/**
 * How well the derivation that makes the H100 Llama-3 profiles (DERIVE: a model's A100 fit × a reference model's
 * H100/A100 ratios at the same TP) predicts a whole profile, checked where it can be: every measured (model, GPU,
 * TP) whose model is also measured on another GPU at that TP, with another model measured on both GPUs at that TP
 * (in the data: llama2-70b and bloom-176b at TP 8, each from the other's ratios). Fits use all runs; the target
 * profile's runs are used only to score. Informational: the derived profiles have no measured rows to check.
 */
export function checkDerivation(rows: readonly MeasuredRow[]): DerivationCheck[] {
  const groups = groupRows(rows);
  const fits = new Map([...groups.entries()].map(([k, g]) => [k, fitProfile(g)]));
  const out: DerivationCheck[] = [];
  for (const [key, target] of [...fits.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    for (const base of fits.values()) {
      if (base.model !== target.model || base.tp !== target.tp || base.gpu === target.gpu) continue;
      for (const refFrom of fits.values()) {
        if (refFrom.model === target.model || refFrom.gpu !== base.gpu || refFrom.tp !== target.tp) continue;
        const refTo = fits.get(profileKey(refFrom.model, target.gpu, target.tp));
        if (refTo === undefined) continue;
        const { prefillRatio, decodeRatio } = gpuRatios(refFrom, refTo);
        const e = errorOn(scaleProfile(base, target.gpu, prefillRatio, decodeRatio, "check"), groups.get(key)!);
        out.push({ key, reference: refFrom.model, ttftMape: e.ttftMape, tpotMape: e.tpotMape });
      }
    }
  }
  return out;
}
