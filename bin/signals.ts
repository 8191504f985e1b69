/** Shutdown signals for the long-running commands (dev, region, global, planner, agent). */

/** Resolves on the first SIGINT or SIGTERM (and removes its handlers). */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(sig);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}
