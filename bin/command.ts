/** The shape of one `tidegate <command>` module (bin/commands/<name>.ts). */
import type { FlagSpec, FlagValues } from "./args.js";
import type { TidegateConfig } from "../core/config.js";

export interface Command {
  name: string;
  /** One line for `tidegate --help`. */
  summary: string;
  /** Extra text for `tidegate <command> --help` (usage, examples). */
  description: string;
  flags: Record<string, FlagSpec>;
  /**
   * The configuration it runs with, from its flags (bin/config-flags.ts): what `run` uses and `--print-config`
   * prints. Absent: `--config` alone (configFromFlags).
   */
  config?(flags: FlagValues): TidegateConfig;
  /** Runs the command; resolves to the exit code. Long-running servers resolve when they stop. */
  run(flags: FlagValues, positional: string[]): Promise<number>;
}
