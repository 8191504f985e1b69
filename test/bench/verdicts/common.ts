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
 * The ratio a / b of a judged figure to its baseline's: a number only when both are finite and b > 0. NaN otherwise,
 * and a NaN ratio fails every check: a judged +Infinity (the figure fell on unserved requests), and a baseline's
 * +Infinity too — a baseline that failed or left requests unfinished is no bar the judged side clears (issue 45: it
 * used to give 0 and pass "≤ 0.5 × ssd" whatever the judged side did). A check on such a ratio says which arm failed
 * how many requests (`failuresNote`).
 */
export function ratio(a: number, b: number): number {
  return Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : Number.NaN;
}

/** One arm a check reads: its name and how many of its requests (or streams, or rounds) failed or were left undone. */
export interface ArmTally {
  arm: string;
  failed: number;
  requests: number;
  /** What `failed` counts and how they failed, for the note: default "requests failed". */
  what?: string;
}

/**
 * The note a check carries for the arms among `arms` that failed anything: "" when none did (a count of 0), else
 * e.g. " (ssd: 3 of 1000 requests failed; blitzscale: 1 of 1000 requests failed)". A check with a note never passes,
 * whichever side the arm is on (issue 45): a judged arm that failed requests is no pass whatever its ratio, and a ratio
 * against a baseline that failed some is not a number. A count that is not a number (unknown) is a failure too.
 */
export function failuresNote(arms: readonly ArmTally[]): string {
  const failed = arms.filter((a) => !(a.failed === 0));
  return failed.length === 0 ? "" : ` (${failed.map((a) => `${a.arm}: ${a.failed} of ${a.requests} ${a.what ?? "requests failed"}`).join("; ")})`;
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
