/**
 * Where plan reports go: the newest `keep` reports in memory or in Redis (served at /plans; Redis lets the global
 * router serve what a separate planner process wrote), and files (`<dir>/<id>.json` and `<dir>/<id>.html`) for
 * `tidegate plan --out DIR`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Redis } from "ioredis";
import { LuaScripts, locateBeside } from "../core/lua.js";
import { renderPlanHtml } from "./html.js";
import type { PlanReport } from "./report.js";

/** Where the loop puts reports and /plans reads them. */
export interface PlanStore {
  /** Stores a report; one with the same id (a review, a late ack) is replaced in place. */
  put(report: PlanReport): Promise<void>;
  get(id: string): Promise<PlanReport | undefined>;
  /** Newest first. */
  list(): Promise<PlanReport[]>;
}

/** The newest reports in memory. */
export class MemoryPlanStore implements PlanStore {
  private readonly reports: PlanReport[] = [];
  /** Keeps the newest `keep` reports (default a week of hourly plans). */
  constructor(private readonly keep = 168) {}
  async put(report: PlanReport): Promise<void> {
    const at = this.reports.findIndex((r) => r.id === report.id);
    if (at >= 0) {
      this.reports[at] = report;
      return;
    }
    this.reports.unshift(report);
    if (this.reports.length > this.keep) this.reports.length = this.keep;
  }
  async get(id: string): Promise<PlanReport | undefined> {
    return this.reports.find((r) => r.id === id);
  }
  async list(): Promise<PlanReport[]> {
    return [...this.reports];
  }
}

/** Writes `<id>.json` and `<id>.html` under `dir` (created); returns both paths. */
export function writePlanFiles(dir: string, report: PlanReport): { json: string; html: string } {
  mkdirSync(dir, { recursive: true });
  const json = join(dir, `${report.id}.json`);
  const html = join(dir, `${report.id}.html`);
  writeFileSync(json, JSON.stringify(report, null, 1));
  writeFileSync(html, renderPlanHtml(report));
  return { json, html };
}

/**
 * Reports in Redis: `<prefix>plans:<id>` (JSON) and `<prefix>plans` (sorted set of ids by decisionId), written by the
 * `plan-put` Lua script, which also drops reports beyond the newest `keep`. The client is the caller's.
 */
export class RedisPlanStore implements PlanStore {
  private readonly scripts: LuaScripts;
  constructor(private readonly client: Redis, private readonly keyPrefix: string, private readonly keep = 168) {
    this.scripts = new LuaScripts(client, locateBeside(import.meta.url, "lua", "../../planner"));
  }
  async put(report: PlanReport): Promise<void> {
    const r = Number(await this.scripts.run("plan-put", [`${this.keyPrefix}plans`, `${this.keyPrefix}plans:${report.id}`], [report.id, report.decisionId, JSON.stringify(report), this.keep, `${this.keyPrefix}plans:`]));
    if (r !== 1) throw new Error(`plan-put returned ${r}`);
  }
  async get(id: string): Promise<PlanReport | undefined> {
    const text = await this.client.get(`${this.keyPrefix}plans:${id}`);
    return text === null ? undefined : (JSON.parse(text) as PlanReport);
  }
  async list(): Promise<PlanReport[]> {
    const ids = await this.client.zrevrange(`${this.keyPrefix}plans`, 0, this.keep - 1);
    if (ids.length === 0) return [];
    const texts = await this.client.mget(...ids.map((id) => `${this.keyPrefix}plans:${id}`));
    return texts.filter((t): t is string => t !== null).map((t) => JSON.parse(t) as PlanReport);
  }
}
