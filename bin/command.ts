/** The shape of one `tidegate <command>` module (bin/commands/<name>.ts). */
import type { FlagSpec, FlagValues } from "./args.js";

export interface Command {
  name: string;
  /** One line for `tidegate --help`. */
  summary: string;
  /** Extra text for `tidegate <command> --help` (usage, examples). */
  description: string;
  flags: Record<string, FlagSpec>;
  /** Runs the command; resolves to the exit code. Long-running servers resolve when they stop. */
  run(flags: FlagValues, positional: string[]): Promise<number>;
}
