/**
 * bench:soak — does tidegate hold up over time (issue 15 item 3)? `--minutes N` (default 10) of mixed streaming and
 * batch through the multi-process deployment (test/e2e/soak.ts: `tidegate global`, three `tidegate region`
 * processes with simulated engines, Redis from REDIS_URL or a private redis-server) at a steady moderate load: 4
 * streaming workers (32 tokens, 100 ms apart) and batches of 200 one after another (1 s apart). Every minute: each
 * process's RSS, open descriptors and event-loop delay p99, and the TTFT p99 of that minute's streams.
 *
 * Targets: RSS growth < 10% from the end of the first minute to the end, in every process; no descriptor growth
 * (median over the last minute ≤ median over the second minute; slack 0); TTFT p99 of the last minute ≤ 1.2× the
 * second minute's; every stream and batch completes. The last line is one JSON object with the per-minute samples,
 * the checks and `met` (and `error` when the run itself failed); the process exits 0 either way.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { parseArgs } from "node:util";
import { runSoak, soakChecks } from "../e2e/soak.js";
import { verdictOf } from "./verdicts/common.js";

const TARGET = { maxRssGrowth: 0.1, fdSlack: 0, maxTtftRatio: 1.2, minutes: 10 };

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { minutes: { type: "string", default: "10" }, help: { type: "boolean", default: false } } });
  if (values.help) {
    console.log("Usage: npm run bench:soak -- [--minutes N]\n\nN minutes (default 10, at least 3) of mixed streaming and batch load through tidegate global and three regions;\nsamples every minute; the last line is the JSON result.");
    return;
  }
  const minutes = Number(values.minutes);
  if (!Number.isInteger(minutes) || minutes < 3) throw new Error(`--minutes must be an integer ≥ 3 (warm-up, the second minute, the last), got ${JSON.stringify(values.minutes)}`);
  console.log(`machine: nproc=${cpus().length} memory=${(totalmem() / 2 ** 30).toFixed(1)} GiB load average ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  const durationMs = minutes * 60_000;
  const r = await runSoak({ durationMs, sampleMs: 60_000, streams: 4, paceMs: 100, batchSize: 200, batchPauseMs: 1000, progress: (l) => console.error(l) });
  const { checks, figures } = soakChecks(r, durationMs, { warmupMs: 60_000, windowMs: 60_000, maxRssGrowth: TARGET.maxRssGrowth, fdSlack: TARGET.fdSlack, maxTtftRatio: TARGET.maxTtftRatio, ttftSlackMs: 0 });
  // A soak shorter than the target's 10 minutes shows less growth than there may be: partial, met false.
  const verdict = verdictOf({ ...checks }, minutes < TARGET.minutes ? [`--minutes ${minutes}`] : []);
  console.log(JSON.stringify({ bench: "soak", minutes, ...figures, loadAverage1m: Number(loadavg()[0]!.toFixed(2)), target: TARGET, checks, met: verdict.met, ...(verdict.partial === true ? { partial: true, shrunk: verdict.shrunk } : {}) }));
}

main().catch((err: unknown) => {
  console.error(err);
  console.log(JSON.stringify({ bench: "soak", error: err instanceof Error ? err.message.split("\n")[0] : String(err), target: TARGET, met: false }));
  process.exitCode = 0;
});
