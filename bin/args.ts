/**
 * A small, strict argument parser for `tidegate <command>`. Flags are declared with a type and a help line;
 * unknown flags and missing values are errors that name the flag, and an unknown flag close to a known one is
 * answered with it (`unknown flag --prot; did you mean --port?`, the rule config keys follow: core/validate.ts
 * `nearest`). `--help` and `--print-config` are handled by the dispatcher.
 */
import { TidegateError } from "../core/errors.js";
import { nearest } from "../core/validate.js";

export interface FlagSpec {
  type: "string" | "number" | "boolean";
  help: string;
  default?: string | number | boolean;
}

export type FlagValues = Record<string, string | number | boolean | undefined>;

export interface ParsedArgs {
  flags: FlagValues;
  positional: string[];
}

export function parseArgs(argv: string[], specs: Record<string, FlagSpec>): ParsedArgs {
  const flags: FlagValues = {};
  for (const [name, spec] of Object.entries(specs)) flags[name] = spec.default;
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const spec = specs[name];
    if (spec === undefined) {
      const near = nearest(name, Object.keys(specs));
      throw new TidegateError("invalid_request", `unknown flag --${name}${near === undefined ? "" : `; did you mean --${near}?`} (see --help)`);
    }
    if (spec.type === "boolean") {
      flags[name] = eq === -1 ? true : arg.slice(eq + 1) !== "false";
      continue;
    }
    let raw: string | undefined;
    if (eq !== -1) raw = arg.slice(eq + 1);
    else {
      raw = argv[++i];
      if (raw === undefined) throw new TidegateError("invalid_request", `--${name} needs a value`);
    }
    if (spec.type === "number") {
      const n = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(n)) throw new TidegateError("invalid_request", `--${name} must be a number, got ${JSON.stringify(raw)}`);
      flags[name] = n;
    } else flags[name] = raw;
  }
  return { flags, positional };
}

/** Renders the flag table for --help. */
export function formatFlags(specs: Record<string, FlagSpec>): string {
  const rows = Object.entries(specs).map(([name, s]) => {
    const left = `  --${name}${s.type === "boolean" ? "" : ` <${s.type}>`}`;
    const def = s.default === undefined ? "" : ` (default: ${String(s.default)})`;
    return `${left.padEnd(30)} ${s.help}${def}`;
  });
  return rows.join("\n");
}
