/**
 * Where plan reports go: an in-memory store of the latest `keep` reports (served at /plans), and files
 * (`<dir>/<id>.json` and `<dir>/<id>.html`) for `tidegate plan --out DIR`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { renderPlanHtml } from "./html.js";
import type { PlanReport } from "./report.js";

/** Where the loop puts reports and /plans reads them. */
export interface PlanStore {
  put(report: PlanReport): void;
  get(id: string): PlanReport | undefined;
  /** Newest first. */
  list(): PlanReport[];
}

/** The newest reports in memory. */
export class MemoryPlanStore implements PlanStore {
  private readonly reports: PlanReport[] = [];
  /** Keeps the newest `keep` reports (default a week of hourly plans). */
  constructor(private readonly keep = 168) {}
  put(report: PlanReport): void {
    this.reports.unshift(report);
    if (this.reports.length > this.keep) this.reports.length = this.keep;
  }
  get(id: string): PlanReport | undefined {
    return this.reports.find((r) => r.id === id);
  }
  list(): PlanReport[] {
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
