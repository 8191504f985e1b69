/**
 * What every bench's `met` is made of (issue 36): checks that a missing, unserved or never-reached figure cannot
 * pass, and a run shrunk by its inputs that cannot pass either. Pure: each bench's verdict module (this folder)
 * builds its checks from its figures with these, and test/bench/verdicts.test.ts shows each failure mode.
 */

/** One target check as a bench prints it: what is checked, the figure, its limit and whether it holds. */
export interface Check {
  check: string;
  /** The figure; NaN (no data) and ±Infinity (unserved, never recovered) print as strings (`jsonFigure`). */
  value: number;
  limit: number;
  ok: boolean;
}

/** value ≤ limit for a measured figure: NaN (no data) and ±Infinity (unserved, never recovered) never pass. */
export function atMost(value: number, limit: number): boolean {
  return Number.isFinite(value) && value <= limit + 1e-12;
}

/** value ≥ limit for a measured figure: NaN and ±Infinity never pass. */
export function atLeast(value: number, limit: number): boolean {
  return Number.isFinite(value) && value >= limit - 1e-12;
}

/**
 * The ratio of a judged latency `a` to its baseline's `b`, where +Infinity means the figure fell on unserved
 * requests: a / b when both are finite and b > 0; 0 when only the baseline's is +Infinity (the judged side served
 * where the baseline did not: better); NaN otherwise — a judged +Infinity, or both sides +Infinity, which are not
 * "equal" (nothing was measured). A NaN ratio fails every check.
 */
export function ratio(a: number, b: number): number {
  if (!Number.isFinite(a) || Number.isNaN(b)) return Number.NaN;
  if (b === Number.POSITIVE_INFINITY) return 0;
  return b > 0 ? a / b : Number.NaN;
}

/** A figure for a JSON line: finite numbers rounded to `digits`, NaN and ±Infinity as strings ("NaN", "Infinity"). */
export function jsonFigure(x: number, digits = 3): number | string {
  return Number.isFinite(x) ? Number(x.toFixed(digits)) : String(x);
}

/**
 * The settings among `names` that the environment sets, as NAME=value: each changes what the run measures (fewer
 * rounds, nodes or requests; other inputs), so a run with any of them is partial. The bench's JSON line names them.
 */
export function envOverrides(names: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  return names.filter((n) => env[n] !== undefined).map((n) => `${n}=${env[n]!}`);
}

/** The verdict of one run: `met` only with at least one check, every check holding, and nothing changed or shrunk. */
export interface Verdict {
  met: boolean;
  /** Present (true) when inputs were changed or shrunk: the figures do not answer the targets. */
  partial?: true;
  /** What changed the run (environment settings, flags), for the JSON line. */
  shrunk?: string[];
  /** The checks that failed. */
  missed: string[];
}

/** The verdict from `checks` (a list, or a record of named booleans) and what shrank the run. */
export function verdictOf(checks: readonly { check: string; ok: boolean }[] | Readonly<Record<string, boolean>>, shrunk: readonly string[] = []): Verdict {
  const list = Array.isArray(checks) ? (checks as readonly { check: string; ok: boolean }[]) : Object.entries(checks).map(([check, ok]) => ({ check, ok }));
  const missed = list.filter((c) => !c.ok).map((c) => c.check);
  return {
    met: list.length > 0 && missed.length === 0 && shrunk.length === 0,
    ...(shrunk.length > 0 ? { partial: true as const, shrunk: [...shrunk] } : {}),
    missed,
  };
}

/** The JSON fields of a partial run (`{ partial: true, shrunk }`), or none. */
export function partialFields(shrunk: readonly string[]): { partial?: true; shrunk?: string[] } {
  return shrunk.length === 0 ? {} : { partial: true, shrunk: [...shrunk] };
}
