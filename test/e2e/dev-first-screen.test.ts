// `tidegate dev`'s first screen as a new user meets it (the compiled CLI on the embedded default: 3 regions,
// 4 models): the first 20 lines of its standard output hold the URL and the admin key; the JSON log goes to
// <queue.dataDir>/dev.log, and stderr holds only a few lines of start-up progress. `--log-file -` sends the log to
// stderr instead. Every wait is on a condition (a line printed, the process gone), with generous deadlines: the
// machine may be busy.
import { afterAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CLI, REPO_ROOT } from "./procs.js";

const dir = mkdtempSync(join(tmpdir(), "tidegate-first-screen-"));
const dataDir = join(dir, "data");
const configFile = join(dir, "config.json");
// Partial: merged over the embedded default, as a user's file would be.
writeFileSync(configFile, JSON.stringify({ router: { port: 0 }, queue: { dataDir } }));

const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** `tidegate dev` with stdout and stderr kept apart. */
function startDev(extra: string[]): { child: ChildProcess; stdout(): string; stderr(): string; exited: Promise<number | string> } {
  const child = spawn(process.execPath, [CLI, "dev", "--config", configFile, ...extra], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString("utf8")));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString("utf8")));
  const exited = new Promise<number | string>((r) => child.once("exit", (code, sig) => r(code ?? sig ?? "unknown")));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Resolves once `cond()` holds; rejects after `timeoutMs` (or when the process exits first) with `context()`. */
async function until(what: string, cond: () => boolean, exited: Promise<unknown>, context: () => string, timeoutMs = 120_000): Promise<void> {
  let gone = false;
  void exited.then(() => (gone = true));
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (gone) throw new Error(`dev exited before ${what}\n${context()}`);
    if (Date.now() > deadline) throw new Error(`no ${what} after ${timeoutMs} ms\n${context()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** SIGTERM, then wait for the exit (SIGKILL after 30 s). */
async function stop(p: { child: ChildProcess; exited: Promise<number | string> }): Promise<number | string> {
  p.child.kill("SIGTERM");
  const timer = setTimeout(() => p.child.kill("SIGKILL"), 30_000);
  const code = await p.exited;
  clearTimeout(timer);
  return code;
}

describe("tidegate dev's first screen", () => {
  it("the first 20 lines of stdout hold the URL and the admin key; the JSON log is in <dataDir>/dev.log, not on the screen", async () => {
    const dev = startDev([]);
    const context = () => `--- stdout\n${dev.stdout()}\n--- stderr\n${dev.stderr()}`;
    // The banner ends with the log's line.
    await until("banner", () => /^log: /m.test(dev.stdout()), dev.exited, context);
    const first20 = dev.stdout().split("\n").slice(0, 20).join("\n");
    const url = /^tidegate dev: serving (http:\/\/127\.0\.0\.1:\d+) /m.exec(first20)?.[1];
    const key = /sign in with the admin key (tg-admin-\S+)/.exec(first20)?.[1];
    expect(url, context()).toBeDefined();
    expect(key, context()).toBeDefined();
    expect(readFileSync(join(dataDir, "planner", "admin.key"), "utf8").trim()).toBe(key);
    expect(first20).toContain(`log: ${join(dataDir, "dev.log")} `);
    // They are true: the URL serves the API, and the key opens the admin listing.
    expect((await fetch(`${url}/v1/models`)).status).toBe(200);
    expect((await fetch(`${url}/admin/regions/us-east/instances`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);

    // No JSON log line on stdout. On stderr: a line at the start and a summary (with a "waiting" line every 10 s
    // between them on a slow machine), and log lines only at warn or error.
    expect(dev.stdout()).not.toMatch(/^\{/m);
    const errLines = dev.stderr().split("\n").filter((l) => l !== "");
    const progress = errLines.filter((l) => !l.startsWith("{"));
    expect(progress[0], context()).toMatch(/^tidegate dev: starting 3 regions; log: /);
    expect(progress.at(-1), context()).toMatch(/^tidegate dev: 24\/24 instances serving after \d+\.\d s \(us-east 8\/8, us-central 8\/8, us-west 8\/8\)$/);
    for (const l of progress.slice(1, -1)) expect(l, context()).toMatch(/^tidegate dev: waiting — \d+\/24 instances serving after /);
    for (const l of errLines.filter((x) => x.startsWith("{"))) expect((JSON.parse(l) as { level: string }).level, l).toMatch(/^(warn|error)$/);
    // The log file has what used to fill the screen.
    const log = readFileSync(join(dataDir, "dev.log"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as { msg: string });
    expect(log.filter((l) => l.msg === "instance serving").length).toBeGreaterThanOrEqual(24);
    expect(log.some((l) => l.msg.startsWith("seeded planner history"))).toBe(true);
    expect(readFileSync(join(dataDir, "dev.log"), "utf8")).not.toContain(key!);

    expect(await stop(dev)).toBe(0);
    expect(dev.stdout()).toContain("tidegate dev: stopped");
  }, 240_000);

  it("--log-file - sends the JSON log to stderr and writes no file", async () => {
    rmSync(join(dataDir, "dev.log"), { force: true });
    const dev = startDev(["--log-file", "-"]);
    const context = () => `--- stdout\n${dev.stdout()}\n--- stderr\n${dev.stderr()}`;
    await until("banner", () => /^log: /m.test(dev.stdout()), dev.exited, context);
    expect(dev.stdout()).toMatch(/^log: stderr \(JSON lines\)$/m);
    const json = dev.stderr().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { msg: string });
    expect(json.filter((l) => l.msg === "instance serving").length).toBeGreaterThanOrEqual(24);
    expect(await stop(dev)).toBe(0);
    expect(() => readFileSync(join(dataDir, "dev.log"))).toThrow(/ENOENT/);
  }, 240_000);
});
