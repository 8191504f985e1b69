/** Flag readers shared by the long-running commands; bad values are usage errors (exit 2), never stack traces. */
import type { FlagValues } from "./args.js";
import { TidegateError } from "../core/errors.js";
import { createLogger, type LogLevel, type LogSink, type Logger } from "../core/log.js";

const LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

/** The logger `--log-level` asks for, tagged with the command's name, writing to `sink` (default: stderr). */
export function loggerFromFlags(flags: FlagValues, cmd: string, sink?: LogSink): Logger {
  const level = String(flags["log-level"] ?? "info");
  if (!(LEVELS as readonly string[]).includes(level)) {
    throw new TidegateError("invalid_request", `--log-level must be debug, info, warn or error, got ${JSON.stringify(level)}`);
  }
  return createLogger(level as LogLevel, { cmd }, sink);
}

/** `--port` when given, else `fallback`; an integer in [0, 65535] (0 picks a free port). */
export function portFromFlags(flags: FlagValues, fallback: number, name = "port"): number {
  const port = typeof flags[name] === "number" ? flags[name] : fallback;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new TidegateError("invalid_request", `--${name} must be an integer in [0, 65535], got ${port}`);
  return port;
}
