/**
 * Request-level trace readers (core/data/README.txt; the full public data's README.txt §1–2):
 * - Azure LLM inference 2023 (`azure_llm_2023/AzureLLMInferenceTrace_{conv,code}.csv`): CRLF lines
 *   `TIMESTAMP,ContextTokens,GeneratedTokens`, TIMESTAMP naive with 7 fractional digits
 *   (`2023-11-16 18:15:46.6805900`, read as UTC; only differences matter).
 * - Mooncake (`mooncake/conversation_trace.jsonl`): one JSON object per line with `timestamp` (ms, relative),
 *   `input_length`, `output_length` and `hash_ids` (the prompt's 512-token block ids: equal ids, equal prefixes;
 *   kept as `blockIds` for the prefix caches, core/prefix.ts blockHashesOfTrace).
 * Arrival times are returned in ms relative to the first request, sorted (stable) by time.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ValidationError } from "../../core/validate.js";

/** One request of a trace. */
export interface TraceRequest {
  /** ms since the first request of the trace (≥ 0). */
  arrivalMs: number;
  promptTokens: number;
  /** Output tokens the request generated in the trace (≥ 1 after reading). */
  outputTokens: number;
  /** The model it asks for, when the workload says (bench:maas, test/bench/maas-setting.ts); absent: assign.ts draws one. */
  model?: string;
  /** Mooncake `hash_ids`: one id per 512 prompt tokens (MOONCAKE_BLOCK_TOKENS), equal ids = equal prefixes. */
  blockIds?: number[];
}

export interface Trace {
  name: string;
  requests: TraceRequest[];
  /** Arrival of the last request (ms). */
  spanMs: number;
}

/** Names `tidegate replay --trace` accepts besides a file path, and their files under the data folder. */
export const NAMED_TRACES: Record<string, string> = {
  "azure-conv": "azure_llm_2023/AzureLLMInferenceTrace_conv.csv",
  "azure-code": "azure_llm_2023/AzureLLMInferenceTrace_code.csv",
  mooncake: "mooncake/conversation_trace.jsonl",
  "mooncake-synthetic": "mooncake/synthetic_trace.jsonl",
};

/** Parses `YYYY-MM-DD HH:MM:SS[.fffffff]` to ms since the epoch (UTC), or NaN. */
export function parseAzureTimestamp(s: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/.exec(s);
  if (m === null) return Number.NaN;
  const base = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]));
  const frac = m[7] === undefined ? 0 : Number(`0.${m[7]}`) * 1000;
  return base + frac;
}

function positiveInt(v: number, where: string, what: string, min: number): number {
  if (!Number.isInteger(v) || v < min) throw new ValidationError(where, `${what} must be an integer ≥ ${min}, got ${v}`, "invalid_request");
  return v;
}

function finish(name: string, requests: TraceRequest[]): Trace {
  if (requests.length === 0) throw new ValidationError(name, "trace has no requests", "invalid_request");
  requests.sort((a, b) => a.arrivalMs - b.arrivalMs);
  const t0 = requests[0]!.arrivalMs;
  for (const r of requests) r.arrivalMs -= t0;
  return { name, requests, spanMs: requests[requests.length - 1]!.arrivalMs };
}

/** Reads an Azure 2023 CSV (header line required; CRLF or LF). Output tokens of 0 are read as 1. */
export function readAzureCsv(text: string, name: string): Trace {
  const lines = text.split(/\r?\n/);
  const header = lines[0]?.trim();
  if (header !== "TIMESTAMP,ContextTokens,GeneratedTokens") {
    throw new ValidationError(`${name}:1`, `expected the header TIMESTAMP,ContextTokens,GeneratedTokens, got ${JSON.stringify(header?.slice(0, 80))}`, "invalid_request");
  }
  const requests: TraceRequest[] = [];
  // Rows of the same minute share `YYYY-MM-DD HH:MM`: parse that once, then only the seconds.
  let minutePrefix = "";
  let minuteMs = 0;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.length === 0) continue;
    const where = `${name}:${i + 1}`;
    const c1 = line.indexOf(",");
    const c2 = line.indexOf(",", c1 + 1);
    if (c1 === -1 || c2 === -1) throw new ValidationError(where, "expected 3 comma-separated columns", "invalid_request");
    const stamp = line.slice(0, c1);
    let t = Number.NaN;
    if (stamp.length >= 19 && stamp.startsWith(minutePrefix) && minutePrefix !== "" && stamp[16] === ":") {
      const seconds = Number(stamp.slice(17));
      if (seconds >= 0 && seconds < 61 && /^\d\d(\.\d{1,9})?$/.test(stamp.slice(17))) t = minuteMs + seconds * 1000;
    }
    if (Number.isNaN(t)) {
      t = parseAzureTimestamp(stamp);
      if (!Number.isNaN(t)) {
        minutePrefix = stamp.slice(0, 16);
        minuteMs = parseAzureTimestamp(`${minutePrefix}:00`);
      }
    }
    if (Number.isNaN(t)) throw new ValidationError(where, `bad TIMESTAMP ${JSON.stringify(stamp)}`, "invalid_request");
    const prompt = positiveInt(Number(line.slice(c1 + 1, c2)), where, "ContextTokens", 1);
    const out = positiveInt(Number(line.slice(c2 + 1)), where, "GeneratedTokens", 0);
    requests.push({ arrivalMs: t, promptTokens: prompt, outputTokens: Math.max(1, out) });
  }
  return finish(name, requests);
}

/** Reads a Mooncake JSONL trace. Output lengths of 0 are read as 1. */
export function readMooncakeJsonl(text: string, name: string): Trace {
  const requests: TraceRequest[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim().length === 0) continue;
    const where = `${name}:${i + 1}`;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (err) {
      throw new ValidationError(where, `not valid JSON: ${(err as Error).message}`, "invalid_request");
    }
    const o = v as { timestamp?: unknown; input_length?: unknown; output_length?: unknown; hash_ids?: unknown };
    if (typeof o !== "object" || o === null || typeof o.timestamp !== "number" || !Number.isFinite(o.timestamp) || o.timestamp < 0) {
      throw new ValidationError(`${where}.timestamp`, "expected a number of ms ≥ 0", "invalid_request");
    }
    const prompt = positiveInt(Number(o.input_length), `${where}.input_length`, "input_length", 1);
    const out = positiveInt(Number(o.output_length), `${where}.output_length`, "output_length", 0);
    const req: TraceRequest = { arrivalMs: o.timestamp, promptTokens: prompt, outputTokens: Math.max(1, out) };
    if (o.hash_ids !== undefined) {
      if (!Array.isArray(o.hash_ids) || !o.hash_ids.every((h) => Number.isSafeInteger(h) && (h as number) >= 0)) {
        throw new ValidationError(`${where}.hash_ids`, "expected an array of integers ≥ 0", "invalid_request");
      }
      req.blockIds = o.hash_ids as number[];
    }
    requests.push(req);
  }
  return finish(name, requests);
}

/** Reads a named trace (NAMED_TRACES, under `dataDir`) or a file (`.csv` Azure format, `.jsonl` Mooncake format). */
export function readTrace(nameOrFile: string, dataDir: string): Trace {
  const named = NAMED_TRACES[nameOrFile];
  const file = named === undefined ? nameOrFile : join(dataDir, named);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const notShipped = named !== undefined && (err as NodeJS.ErrnoException).code === "ENOENT";
    throw new ValidationError("--trace", notShipped ? `${nameOrFile} is not in ${dataDir} (tidegate ships only the Azure 2023 traces): pass --data-dir with a full copy of the public data, e.g. ../shared/data (core/data/README.txt)` : `cannot read ${file}: ${(err as Error).message}`, "invalid_request");
  }
  if (file.endsWith(".csv")) return readAzureCsv(text, nameOrFile);
  if (file.endsWith(".jsonl")) return readMooncakeJsonl(text, nameOrFile);
  throw new ValidationError("--trace", `unknown trace ${JSON.stringify(nameOrFile)}: use ${Object.keys(NAMED_TRACES).join(", ")}, a .csv (Azure format) or a .jsonl (Mooncake format)`, "invalid_request");
}
