/**
 * Which configuration a plan was made for: its fleet (regions with their GPUs and endpoints, and the models) as a
 * short digest, so that plans of different configurations kept in one store — `tidegate dev` started on the embedded
 * default, then on deploy/examples/dev-scaling.json, with one data directory — are kept apart: the index shows the
 * running configuration's plans, and a round compares itself only with plans of its own fleet. Ports, addresses,
 * data directories and tuning (SLOs, intervals, instance bounds) are not part of it: they do not change what a plan
 * is about. A disaggregated model's pools are endpoints of their own (`model@gpu#role`).
 */
import { createHash } from "node:crypto";
import type { TidegateConfig } from "../core/config.js";

/** A plan's configuration, as the report carries it (`PlanReport.fleet`). */
export interface PlanFleet {
  /** 12 hex digits of SHA-256 over the canonical fleet (see the file comment). */
  fingerprint: string;
  regions: string[];
  models: string[];
}

/** The fleet `config` describes (see the file comment); equal fleets give equal fingerprints, in any order. */
export function planFleet(config: Pick<TidegateConfig, "regions" | "models">): PlanFleet {
  const regions = [...config.regions]
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((r) => ({ name: r.name, gpus: r.gpus.map((g) => `${g.type}×${g.count}`).sort(), endpoints: r.endpoints.map((e) => `${e.model}@${e.gpu}${e.role === undefined ? "" : `#${e.role}`}`).sort() }));
  const models = config.models.map((m) => m.name).sort();
  const fingerprint = createHash("sha256").update(JSON.stringify({ regions, models })).digest("hex").slice(0, 12);
  return { fingerprint, regions: regions.map((r) => r.name), models };
}

/**
 * Whether `report` belongs with the fleet `fingerprint`: made for it, or not known to be made for another (a report
 * from before fingerprints, an offline plan) — those are kept with every fleet, as they were before.
 */
export function sameFleet(report: { fleet?: PlanFleet }, fingerprint: string): boolean {
  return report.fleet === undefined || report.fleet.fingerprint === fingerprint;
}
