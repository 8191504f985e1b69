/**
 * The engine keeper: `node keeper.js <graceMs> <command> [args...]`, spawned by EngineSupervisor, one per engine.
 * It starts the command in its own process group (setsid) with the keeper's stdout and stderr, and kills that
 * whole group — SIGTERM, then SIGKILL after the grace — when:
 *   - its stdin (a pipe held only by the agent) closes: the agent exited, even by `kill -9`;
 *   - the agent writes `stop <graceMs>\n` on stdin (StopEngine);
 *   - the keeper gets SIGTERM, SIGINT or SIGHUP.
 * When the command's leader exits, what is left of its group gets SIGKILL and the keeper exits.
 * Reports go to fd 3 as JSON lines: {"pid":N} once spawned, {"error":"..."} when spawning failed,
 * {"code":N|null,"signal":"SIG..."|null} when the command exited. Exit code: 0, or 127 when spawning failed.
 * A keeper killed by SIGKILL cannot clean up; nothing else in the agent sends it one while its engine runs.
 */
import { spawn } from "node:child_process";
import { writeSync } from "node:fs";

function report(msg: Record<string, unknown>): void {
  try {
    writeSync(3, JSON.stringify(msg) + "\n");
  } catch {
    // The agent is gone (EPIPE) or fd 3 was not given: nobody to tell; the group is still cleaned up.
  }
}

function killGroup(pgid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pgid, sig);
  } catch {
    // ESRCH: the group is already empty.
  }
}

const [graceArg, command, ...args] = process.argv.slice(2);
const defaultGraceMs = Number(graceArg);
if (command === undefined || !Number.isInteger(defaultGraceMs) || defaultGraceMs < 0) {
  process.stderr.write("usage: keeper.js <graceMs> <command> [args...]\n");
  process.exit(2);
}

const child = spawn(command, args, { stdio: ["ignore", "inherit", "inherit"], detached: true });
let stopping: { killAt: number; timer: NodeJS.Timeout } | undefined;

function stop(graceMs: number): void {
  const pid = child.pid;
  if (pid === undefined) return;
  const killAt = Date.now() + graceMs;
  if (stopping !== undefined) {
    if (killAt >= stopping.killAt) return;
    clearTimeout(stopping.timer);
  } else killGroup(pid, "SIGTERM");
  stopping = { killAt, timer: setTimeout(() => killGroup(pid, "SIGKILL"), graceMs) };
}

child.once("spawn", () => report({ pid: child.pid }));
child.once("error", (err) => {
  // Only spawn failures reach here (ENOENT, EACCES): the child never ran.
  process.stderr.write(`keeper: cannot start ${command}: ${err.message}\n`);
  report({ error: `cannot start ${command}: ${err.message}` });
  process.exit(127);
});
child.once("exit", (code, signal) => {
  if (child.pid !== undefined) killGroup(child.pid, "SIGKILL");
  report({ code, signal });
  process.exit(0);
});

let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  buffered += chunk;
  for (let nl = buffered.indexOf("\n"); nl !== -1; nl = buffered.indexOf("\n")) {
    const line = buffered.slice(0, nl).trim();
    buffered = buffered.slice(nl + 1);
    const m = /^stop (\d+)$/.exec(line);
    if (m !== null) stop(Number(m[1]));
  }
});
process.stdin.on("end", () => stop(defaultGraceMs));
process.stdin.on("error", () => stop(defaultGraceMs));
for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, () => stop(defaultGraceMs));
