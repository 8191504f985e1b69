/**
 * Config files: merged over the embedded default, validated with every error reported (not just the first), read
 * from one or several files.
 */
import { readFileSync } from "node:fs";
import { TidegateError } from "../errors.js";
import { ValidationError, parseJson } from "../validate.js";
import { DEFAULT_CONFIG_JSON } from "./defaults.js";
import { parseConfig, type TidegateConfig } from "./parse.js";

/**
 * A partial config merged over the embedded default: objects merge key by key (the file wins), arrays and scalars
 * replace. So `{"controller":{"strategy":"reactive"}}` is the default fleet with another strategy, and a file that
 * gives `regions` brings its own regions.
 */
export function mergeOverDefault(partial: unknown, base: unknown = DEFAULT_CONFIG_JSON): unknown {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (!isObject(partial) || !isObject(base)) return partial;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(partial)) out[k] = k in base ? mergeOverDefault(v, base[k]) : v;
  return out;
}

/** Splits a ValidationError path (`regions[1].gpus[0].count`) into keys and indexes. */
function pathSegments(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  return out;
}

/**
 * Validates `json` and reports every error, not just the first: after each error the offending field is removed
 * and validation runs again (at most 50 rounds; a field whose removal only makes it "required" ends the search
 * for that path; an error that removing a field caused in its container is not reported). Returns the config when
 * there is no error.
 */
export function validateConfig(json: unknown): { config?: TidegateConfig; errors: ValidationError[] } {
  let doc: unknown = structuredClone(json);
  const errors: ValidationError[] = [];
  const seen = new Set<string>();
  for (let round = 0; round < 50; round++) {
    try {
      const config = parseConfig(doc);
      return errors.length === 0 ? { config, errors } : { errors };
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      if (seen.has(err.path)) return { errors };
      seen.add(err.path);
      // An error on a container that held a field removed here ("must have at least 2 element(s)" once a bad
      // element is gone) is an artifact of the search, not the user's: remove the container without reporting it.
      const artifact = errors.some((e) => e.path.startsWith(`${err.path}[`) || e.path.startsWith(`${err.path}.`));
      if (!artifact) errors.push(err);
      const segs = pathSegments(err.path);
      let parent: unknown = doc;
      for (const s of segs.slice(0, -1)) parent = (parent as Record<string | number, unknown> | undefined)?.[s];
      const last = segs[segs.length - 1];
      if (last === undefined || typeof parent !== "object" || parent === null) return { errors };
      if (Array.isArray(parent) && typeof last === "number") parent.splice(last, 1);
      else delete (parent as Record<string, unknown>)[String(last)];
    }
  }
  return { errors };
}

/**
 * Reads a config file, merges it over the embedded default (mergeOverDefault) and validates it; `undefined` gives
 * the embedded default. `file` may list several files separated by commas, merged in order (later files win), e.g.
 * `tidegate.json,secrets.json` where the second (a Kubernetes Secret) holds router.apiKeys, router.adminKeys and
 * queue.redisUrl. Every error is reported, one per line, each naming its path (and the nearest known key for an
 * unknown one).
 */
export function loadConfig(file?: string): TidegateConfig {
  if (file === undefined) return parseConfig(DEFAULT_CONFIG_JSON);
  let doc: unknown = DEFAULT_CONFIG_JSON;
  for (const f of file.split(",").filter((x) => x !== "")) {
    let text: string;
    try {
      text = readFileSync(f, "utf8");
    } catch (err) {
      throw new ValidationError(f, `cannot read config file: ${(err as Error).message}`);
    }
    doc = mergeOverDefault(parseJson(text, `config file ${f}`, "invalid_config"), doc);
  }
  const { config, errors } = validateConfig(doc);
  if (config !== undefined) return config;
  if (errors.length === 1) throw errors[0]!;
  throw new TidegateError("invalid_config", `config file ${file} has ${errors.length} errors:\n  ${errors.map((e) => e.message).join("\n  ")}`, { cause: errors[0] });
}
