/**
 * A minimal structured logger: one JSON line per event on stderr, or on a sink (`tidegate dev` writes a file:
 * bin/dev-output.ts). Values named like secrets (key, token, password, authorization) are redacted so secrets never
 * reach logs.
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const SECRET = /(key|token|password|secret|authorization|credential)/i;

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

function redact(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (SECRET.test(k)) out[k] = "[redacted]";
    else if (v instanceof Error) out[k] = { name: v.name, message: v.message, ...("code" in v ? { code: (v as { code: unknown }).code } : {}) };
    else out[k] = v;
  }
  return out;
}

/** Where a logger's lines go: one JSON line (no newline) and its level. */
export type LogSink = (line: string, level: LogLevel) => void;

/** A logger writing to `sink` (stderr by default) at `level` and above. */
export function createLogger(level: LogLevel = "info", base: Record<string, unknown> = {}, sink: LogSink = (l) => process.stderr.write(l + "\n")): Logger {
  const emit = (lvl: LogLevel, msg: string, fields: Record<string, unknown> = {}) => {
    if (ORDER[lvl] < ORDER[level]) return;
    sink(JSON.stringify({ t: new Date().toISOString(), level: lvl, msg, ...redact(base), ...redact(fields) }), lvl);
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => createLogger(level, { ...base, ...fields }, sink),
  };
}

/** A logger that drops everything (tests, replay). */
export const silentLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silentLogger,
};
