/**
 * Spawning the compiled CLI (`node dist/bin/tidegate.js …`) for cross-tier tests and benches: wait until a
 * process prints a line matching a pattern, collect its output for failure messages, and stop it (SIGTERM, then
 * SIGKILL after a grace period). Every process spawned here is tracked so `stopAll()` can clean up in afterAll.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import OpenAI from "openai";
import type { RegionInstances } from "../../core/ports.js";
import type { PlanReport } from "../../planner/report.js";
import type { TidegateConfig } from "../../core/config.js";

/** The repository root (this file is test/e2e/procs.ts, compiled or not). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), fileURLToPath(import.meta.url).includes("/dist/") ? "../../.." : "../..");
/** The compiled CLI entry point. */
export const CLI = resolve(REPO_ROOT, "dist/bin/tidegate.js");

export interface Proc {
  name: string;
  child: ChildProcess;
  /** stdout + stderr so far (the last `keepChars` characters; 64 Ki by default). */
  output(): string;
  /** The first match of `readyPattern` in the output. */
  match: RegExpMatchArray;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code (or signal name). */
  stop(graceMs?: number): Promise<number | string>;
}

const running = new Set<Proc>();

/**
 * The kernel's ephemeral range (ports it hands out for port-0 binds and outgoing connections), from
 * /proc/sys/net/ipv4/ip_local_port_range; Linux's default when unreadable.
 */
function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number);
    if (Number.isInteger(lo) && Number.isInteger(hi)) return [lo!, hi!];
  } catch {
    // not Linux: the default below
  }
  return [32768, 60999];
}

/** Binds `port` on 127.0.0.1 and releases it: whether it was free. */
function tryPort(port: number): Promise<boolean> {
  return new Promise((resolveFree) => {
    const srv = createServer();
    srv.once("error", () => resolveFree(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolveFree(true)));
  });
}

/**
 * A free TCP port on 127.0.0.1 for a process to bind later, chosen below the kernel's ephemeral range: a port taken
 * from that range could be handed to any other process's port-0 bind or outgoing connection before ours binds it (a
 * parallel test's engine took one in a CI run: EADDRINUSE). Below it only another test's pick can collide, and a
 * random pick makes that rare.
 */
export async function freePort(): Promise<number> {
  const [lo] = ephemeralRange();
  const floor = Math.min(20_000, Math.max(1024, lo - 8192));
  for (let i = 0; i < 200; i++) {
    const port = floor + Math.floor(Math.random() * Math.max(1, lo - floor));
    if (await tryPort(port)) return port;
  }
  throw new Error(`no free port below the ephemeral range (${floor}–${lo - 1}) after 200 tries`);
}

/**
 * Extra node flags for a spawned process, for profiling under a bench: TIDEGATE_NODE_FLAGS (space-separated,
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`) applies to every process, TIDEGATE_NODE_FLAGS_<NAME> (name upper-cased,
 * `-` → `_`) to the one named `name`. Empty when unset.
 */
function nodeFlags(name: string): string[] {
  const own = process.env[`TIDEGATE_NODE_FLAGS_${name.toUpperCase().replace(/-/g, "_")}`] ?? "";
  return `${process.env.TIDEGATE_NODE_FLAGS ?? ""} ${own}`.split(" ").filter((f) => f.length > 0);
}

/**
 * Spawns `node dist/bin/tidegate.js <args>` and resolves once its output matches `readyPattern`; rejects (and
 * kills it) when it exits first or `timeoutMs` passes, with its output in the message. `keepChars` bounds what
 * `output()` keeps (the newest characters).
 */
export function spawnTidegate(name: string, args: string[], readyPattern: RegExp, timeoutMs = 40_000, keepChars = 65536): Promise<Proc> {
  return spawnScript(name, CLI, args, readyPattern, timeoutMs, keepChars);
}

/**
 * `spawnTidegate` for any Node script (`node <script> <args>`), e.g. a bench's helper process or another copy's CLI;
 * run in `cwd` (default the repository root).
 */
export function spawnScript(name: string, script: string, args: string[], readyPattern: RegExp, timeoutMs = 40_000, keepChars = 65536, cwd = REPO_ROOT): Promise<Proc> {
  return spawnCommand(name, process.execPath, [...nodeFlags(name), script, ...args], readyPattern, timeoutMs, keepChars, cwd);
}

/** `spawnTidegate` inside network namespace `ns` (`ip netns exec`, which execs the CLI: the child is the CLI's process). */
export function spawnTidegateIn(ns: string, name: string, args: string[], readyPattern: RegExp, timeoutMs = 40_000): Promise<Proc> {
  return spawnCommand(name, "ip", ["netns", "exec", ns, process.execPath, ...nodeFlags(name), CLI, ...args], readyPattern, timeoutMs);
}

/** Spawns `command argv` and resolves once its output matches `readyPattern` (spawnTidegate's rules). */
function spawnCommand(name: string, command: string, argv: string[], readyPattern: RegExp, timeoutMs = 40_000, keepChars = 65536, cwd = REPO_ROOT): Promise<Proc> {
  const args = argv;
  const child = spawn(command, argv, { cwd, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const append = (d: Buffer) => {
    out += d.toString("utf8");
    if (out.length > keepChars) out = out.slice(-keepChars);
  };
  child.stdout!.on("data", append);
  child.stderr!.on("data", append);
  const exited = new Promise<number | string>((r) => child.once("exit", (code, sig) => r(code ?? sig ?? "unknown")));
  const proc: Proc = {
    name,
    child,
    output: () => out,
    match: [] as unknown as RegExpMatchArray,
    stop: async (graceMs = 5000) => {
      running.delete(proc);
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  running.add(proc);
  return new Promise((resolveProc, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      child.stdout!.off("data", check);
      void proc.stop(1000);
      reject(new Error(`${name} (${args.join(" ")}): ${why}\n--- output ---\n${out}`));
    };
    const timer = setTimeout(() => fail(`not ready after ${timeoutMs} ms`), timeoutMs);
    const check = () => {
      const m = out.match(readyPattern);
      if (m === null) return;
      clearTimeout(timer);
      child.stdout!.off("data", check);
      child.stderr!.off("data", check);
      proc.match = m;
      resolveProc(proc);
    };
    child.stdout!.on("data", check);
    child.stderr!.on("data", check);
    void exited.then((code) => {
      if (proc.match.length === 0) fail(`exited with ${code} before it was ready`);
    });
  });
}

/** Stops every process spawned here that is still running. */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop()));
}

/** Runs `node dist/bin/tidegate.js <args>` to completion (2 min at most): its exit code, stdout and stderr. */
export async function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await promisify(execFile)(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, timeout: 120_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** A `tidegate dev` process on a config file, with the URL, admin key and log file it printed. */
export interface DevProc {
  proc: Proc;
  url: string;
  key: string;
  /** Its JSON log file (the banner's `log:` line: `<queue.dataDir>/dev.log` by default). */
  logFile: string;
  /** The log's lines so far. */
  log(): string;
}

/** Writes `config` to `dir`/dev.json and starts `tidegate dev --config` on it (port 0); resolves once it serves. */
export async function startDev(config: object, dir: string): Promise<DevProc> {
  const file = join(dir, "dev.json");
  writeFileSync(file, JSON.stringify(config));
  const proc = await spawnTidegate("dev", ["dev", "--config", file, "--port", "0", "--log-level", "info"], /tidegate dev: serving (http:\/\/\S+)[\s\S]*admin key (tg-admin-\S+)[\s\S]*\nlog: (\S+) /, 60_000);
  const logFile = proc.match[3]!;
  return { proc, url: proc.match[1]!, key: proc.match[2]!, logFile, log: () => readFileSync(logFile, "utf8") };
}

/** `GET /admin/regions/{region}/instances` with the admin key; throws unless it answers 200. */
export async function regionListing(dev: DevProc, region: string): Promise<RegionInstances> {
  const res = await fetch(`${dev.url}/admin/regions/${region}/instances`, { headers: { authorization: `Bearer ${dev.key}` } });
  if (res.status !== 200) throw new Error(`GET /admin/regions/${region}/instances answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as RegionInstances;
}

/** The first plan a planner serving `/plans` at `url` made (read with `key`), once there is one (within `timeoutMs`). */
export async function firstPlan(url: string, key: string, timeoutMs = 20_000): Promise<PlanReport> {
  const auth = { authorization: `Bearer ${key}`, accept: "application/json" };
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = (await (await fetch(`${url}/plans`, { headers: auth })).json()) as { data: { id: string }[] };
    if (list.data.length > 0) return (await (await fetch(`${url}/plans/${list.data.at(-1)!.id}.json`, { headers: auth })).json()) as PlanReport;
    if (Date.now() > deadline) throw new Error(`no plan at ${url}/plans after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * What keeps `report` from being a first plan worth reading for `config` (empty when nothing does): a (model, region)
 * without a forecast (or one the config lacks), a forecast with no peak or under a day (144 windows) of history,
 * a "no interactive history" warning.
 */
export function forecastProblems(report: PlanReport, config: TidegateConfig): string[] {
  const pairs = config.regions.flatMap((r) => r.endpoints.map((e) => `${e.model}@${r.name}`)).sort();
  const got = report.forecasts.map((f) => `${f.model}@${f.region}`).sort();
  const problems = [...pairs.filter((p) => !got.includes(p)).map((p) => `${p}: no forecast`), ...got.filter((p) => !pairs.includes(p)).map((p) => `${p}: not in the config`)];
  for (const f of report.forecasts) {
    if (!(f.peak.mean > 0)) problems.push(`${f.model}@${f.region}: peak ${f.peak.mean}`);
    const windows = f.historyWindows.filter(Number.isFinite).length;
    if (windows < 144) problems.push(`${f.model}@${f.region}: ${windows} windows of history`);
  }
  return [...problems, ...report.warnings.filter((w) => /no interactive history/.test(w))];
}

/** The sum of `name`'s series on `url`/metrics whose labels contain `labels` (0 when none). */
export async function metricSum(url: string, name: string, labels = ""): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(`${name}{`) && l.includes(labels)).reduce((a, l) => a + Number(l.split(" ").at(-1)), 0);
}

/**
 * Streams `n` chat requests of a ~300-token prompt and `maxTokens` output through the router at `url` with the official
 * `openai` client, checking each streamed text and its usage; returns the prompt tokens of all of them (what a
 * prefill/decode deployment moves as KV).
 */
export async function streamPrompts(url: string, model: string, n: number, maxTokens: number): Promise<number> {
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "any" });
  let promptTotal = 0;
  for (let i = 0; i < n; i++) {
    const stream = await client.chat.completions.create({ model, messages: [{ role: "user", content: `request ${i}: ` + "tidegate ".repeat(150) }], max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let prompt = 0;
    let completion = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) [prompt, completion] = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens];
    }
    if (completion !== maxTokens || text.length === 0) throw new Error(`request ${i}: ${completion} tokens streamed (${text.length} characters), expected ${maxTokens}`);
    promptTotal += prompt;
  }
  return promptTotal;
}
