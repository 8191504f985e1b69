/**
 * Token lengths drawn from the Azure LLM inference traces 2023 (Splitwise, ISCA'24; CC-BY 4.0):
 * AzureLLMInferenceTrace_{conv,code}.csv, columns TIMESTAMP, ContextTokens, GeneratedTokens. A request's
 * (prompt, output) pair is one real row, picked uniformly.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ValidationError } from "../../core/validate.js";
import type { Random } from "./rng.js";

/** The empirical (prompt, output) pairs of one trace. */
export interface TokenSamples {
  name: "conv" | "code";
  prompt: Uint32Array;
  output: Uint32Array;
  meanPrompt: number;
  meanOutput: number;
}

/** Parses one Azure CSV (header required); errors name the file and line. */
export function parseAzureCsv(name: "conv" | "code", text: string): TokenSamples {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  if (lines[0]?.trim() !== "TIMESTAMP,ContextTokens,GeneratedTokens") throw new ValidationError(`azure ${name} line 1`, `expected header TIMESTAMP,ContextTokens,GeneratedTokens`);
  const n = lines.length - 1;
  const prompt = new Uint32Array(n);
  const output = new Uint32Array(n);
  let sp = 0;
  let so = 0;
  for (let i = 0; i < n; i++) {
    const f = lines[i + 1]!.split(",");
    const p = Number(f[1]);
    const o = Number(f[2]);
    if (!(Number.isInteger(p) && p >= 1) || !(Number.isInteger(o) && o >= 0)) throw new ValidationError(`azure ${name} line ${i + 2}`, `token counts must be integers (context ≥ 1), got ${f[1]},${f[2]}`);
    prompt[i] = p;
    output[i] = Math.max(1, o);
    sp += p;
    so += Math.max(1, o);
  }
  if (n === 0) throw new ValidationError(`azure ${name}`, "no rows");
  return { name, prompt, output, meanPrompt: sp / n, meanOutput: so / n };
}

/** Loads `AzureLLMInferenceTrace_<name>.csv` from `dir`. */
export function loadAzureTokens(dir: string, name: "conv" | "code"): TokenSamples {
  const file = join(dir, `AzureLLMInferenceTrace_${name}.csv`);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ValidationError(`tokens ${name}`, `cannot read ${file}: ${(err as Error).message}`);
  }
  return parseAzureCsv(name, text);
}

/** Draws one row index uniformly. */
export function drawRow(s: TokenSamples, r: Random): number {
  return Math.floor(r() * s.prompt.length);
}
