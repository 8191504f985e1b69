/** `tidegate replay` (placeholder until its issue lands: exits 2 with a clear message). */
import type { Command } from "../command.js";

export const command: Command = {
  name: "replay",
  summary: "not built yet",
  description: "This command is not built yet.",
  flags: {},
  async run() {
    process.stderr.write("tidegate replay: not built yet\n");
    return 2;
  },
};
