/**
 * Small, strict readers for untrusted JSON (config files, request bodies, workload files). Each reader names the
 * exact path at fault (`regions[1].gpus[0].count`) and rejects bad values; nothing is silently replaced. A missing
 * optional field takes the documented default; a present field of the wrong type or range is an error.
 */
import { TidegateError, type ErrorCode } from "./errors.js";

/** Error for a value at a path. `code` defaults to invalid_config; request validation passes invalid_request. */
export class ValidationError extends TidegateError {
  readonly path: string;
  constructor(path: string, message: string, code: ErrorCode = "invalid_config") {
    super(code, `${path}: ${message}`, { param: path });
    this.name = "ValidationError";
    this.path = path;
  }
}

export function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v)}`;
  if (typeof v === "number") return `the number ${v}`;
  return `a ${typeof v}`;
}

export function joinPath(base: string, key: string | number): string {
  if (typeof key === "number") return `${base}[${key}]`;
  return base === "" ? key : `${base}.${key}`;
}

export interface NumberRules {
  min?: number;
  max?: number;
  /** Exclusive lower bound. */
  gt?: number;
  integer?: boolean;
}

/**
 * A cursor over one JSON object. `code` selects the error code for every error raised through it.
 * Unknown keys are rejected by `done()` so typos do not pass silently.
 */
export class ObjectReader {
  private readonly seen = new Set<string>();
  readonly value: Record<string, unknown>;

  constructor(
    value: unknown,
    readonly path: string,
    readonly code: ErrorCode = "invalid_config",
  ) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw new ValidationError(path || "(root)", `expected an object, got ${describe(value)}`, code);
    }
    this.value = value as Record<string, unknown>;
  }

  /** Whether `key` is set. Asking makes it a known field: `done()` then suggests it for a misspelling even when unset. */
  has(key: string): boolean {
    this.seen.add(key);
    return this.value[key] !== undefined;
  }

  private take(key: string): unknown {
    this.seen.add(key);
    return this.value[key];
  }

  fail(key: string, message: string): never {
    throw new ValidationError(joinPath(this.path, key), message, this.code);
  }

  /** Marks a key as known without reading it (for keys passed through untouched). */
  allow(...keys: string[]): this {
    for (const k of keys) this.seen.add(k);
    return this;
  }

  raw(key: string): unknown {
    return this.take(key);
  }

  string(key: string, fallback?: string, rules: { nonEmpty?: boolean; maxLength?: number; oneOf?: readonly string[] } = {}): string {
    const v = this.take(key);
    if (v === undefined) {
      if (fallback === undefined) this.fail(key, "is required");
      return fallback;
    }
    if (typeof v !== "string") this.fail(key, `expected a string, got ${describe(v)}`);
    if ((rules.nonEmpty ?? true) && v.length === 0) this.fail(key, "must not be empty");
    if (rules.maxLength !== undefined && v.length > rules.maxLength) this.fail(key, `must be at most ${rules.maxLength} characters`);
    if (rules.oneOf && !rules.oneOf.includes(v)) this.fail(key, `must be one of ${rules.oneOf.join(", ")}, got ${JSON.stringify(v)}`);
    return v;
  }

  optionalString(key: string, rules: { maxLength?: number; oneOf?: readonly string[] } = {}): string | undefined {
    return this.has(key) ? this.string(key, undefined, rules) : (this.take(key), undefined);
  }

  number(key: string, fallback?: number, rules: NumberRules = {}): number {
    const v = this.take(key);
    if (v === undefined) {
      if (fallback === undefined) this.fail(key, "is required");
      return fallback;
    }
    return checkNumber(v, joinPath(this.path, key), rules, this.code);
  }

  optionalNumber(key: string, rules: NumberRules = {}): number | undefined {
    return this.has(key) ? this.number(key, undefined, rules) : (this.take(key), undefined);
  }

  boolean(key: string, fallback?: boolean): boolean {
    const v = this.take(key);
    if (v === undefined) {
      if (fallback === undefined) this.fail(key, "is required");
      return fallback;
    }
    if (typeof v !== "boolean") this.fail(key, `expected true or false, got ${describe(v)}`);
    return v;
  }

  object(key: string, required = false): ObjectReader {
    const v = this.take(key);
    if (v === undefined) {
      if (required) this.fail(key, "is required");
      return new ObjectReader({}, joinPath(this.path, key), this.code);
    }
    return new ObjectReader(v, joinPath(this.path, key), this.code);
  }

  /** Reads an array, mapping each element with its path; `fallback` applies only when the key is missing. */
  array<T>(key: string, each: (value: unknown, path: string, index: number) => T, fallback?: T[], rules: { minLength?: number; maxLength?: number } = {}): T[] {
    const v = this.take(key);
    if (v === undefined) {
      if (fallback === undefined) this.fail(key, "is required");
      return fallback;
    }
    if (!Array.isArray(v)) this.fail(key, `expected an array, got ${describe(v)}`);
    if (rules.minLength !== undefined && v.length < rules.minLength) this.fail(key, `must have at least ${rules.minLength} element(s)`);
    if (rules.maxLength !== undefined && v.length > rules.maxLength) this.fail(key, `must have at most ${rules.maxLength} element(s)`);
    return v.map((el, i) => each(el, joinPath(joinPath(this.path, key), i), i));
  }

  /** Throws if the object holds keys nobody read, suggesting the nearest known key for a typo. */
  done(): void {
    for (const k of Object.keys(this.value)) {
      if (this.seen.has(k)) continue;
      const near = nearest(k, [...this.seen].filter((s) => !(s in this.value)));
      throw new ValidationError(joinPath(this.path, k), `is not a known field${near === undefined ? "" : `; did you mean ${JSON.stringify(near)}?`}`, this.code);
    }
  }
}

/** Levenshtein distance between two strings (case-insensitive). */
export function editDistance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[y.length]!;
}

/** The candidate closest to `word` when it is close enough to be a typo (distance ≤ max(2, ⌊length / 3⌋)), else undefined. */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestD) [best, bestD] = [c, d];
  }
  return bestD <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

export function checkNumber(v: unknown, path: string, rules: NumberRules = {}, code: ErrorCode = "invalid_config"): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw new ValidationError(path, `expected a finite number, got ${describe(v)}`, code);
  if (rules.integer && !Number.isInteger(v)) throw new ValidationError(path, `expected an integer, got ${v}`, code);
  if (rules.min !== undefined && v < rules.min) throw new ValidationError(path, `must be ≥ ${rules.min}, got ${v}`, code);
  if (rules.gt !== undefined && !(v > rules.gt)) throw new ValidationError(path, `must be > ${rules.gt}, got ${v}`, code);
  if (rules.max !== undefined && v > rules.max) throw new ValidationError(path, `must be ≤ ${rules.max}, got ${v}`, code);
  return v;
}

export function checkString(v: unknown, path: string, code: ErrorCode = "invalid_config"): string {
  if (typeof v !== "string" || v.length === 0) throw new ValidationError(path, `expected a non-empty string, got ${describe(v)}`, code);
  return v;
}

/** Parses JSON text, turning a syntax error into a ValidationError with the given code. */
export function parseJson(text: string, what: string, code: ErrorCode = "invalid_json"): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new TidegateError(code, `${what} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * `{ [key]: value }`, or `{}` when the value is absent (an optional key read with the reader's `optional*` methods;
 * a key read or asked about with `has` is a known field, so a misspelling of it gets the suggestion — "engines.
 * kvCapacityToken: … did you mean "kvCapacityTokens"?" — even when the file does not set it).
 */
export function present<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
