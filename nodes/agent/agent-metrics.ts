/**
 * The node agent's Prometheus metrics, read from its announcement at each scrape (nothing to keep in sync):
 * engines by state, GPU slots, parameter bytes held in host memory, and whether its region answers announces.
 */
import { Gauge, createRegistry, initLabels, type Registry } from "../../core/metrics.js";
import type { EngineState, NodeAnnouncement } from "./handle.js";

const ENGINE_STATES: readonly EngineState[] = ["starting", "running", "exited"];

/** A registry (with process metrics) whose agent gauges are computed from `announcement()` when scraped. */
export function agentRegistry(o: { announcement: () => NodeAnnouncement; regionReachable: () => boolean | undefined }): Registry {
  const registry = createRegistry();
  const registers = [registry];
  const engines = new Gauge({
    name: "tidegate_agent_engines",
    help: "Engine processes on this node by state (exited: the last ones kept for their exit codes)",
    labelNames: ["state"],
    registers,
    collect() {
      const a = o.announcement();
      for (const s of ENGINE_STATES) this.set({ state: s }, a.engines.filter((e) => e.state === s).length);
    },
  });
  initLabels(engines, { state: ENGINE_STATES });
  new Gauge({
    name: "tidegate_agent_gpu_slots",
    help: "GPUs engines may use on this node (--gpu-slots)",
    registers,
    collect() {
      this.set(o.announcement().gpuSlots);
    },
  });
  new Gauge({
    name: "tidegate_agent_gpus_in_use",
    help: "GPUs held by engines that have not exited",
    registers,
    collect() {
      this.set(o.announcement().engines.filter((e) => e.state !== "exited").reduce((n, e) => n + e.gpus, 0));
    },
  });
  new Gauge({
    name: "tidegate_agent_parameter_bytes",
    help: "Parameter bytes present in this node's block stores (host memory)",
    registers,
    collect() {
      this.set(o.announcement().stores.reduce((n, s) => n + (s.blockCount > 0 ? (s.totalBytes * s.present) / s.blockCount : 0), 0));
    },
  });
  new Gauge({
    name: "tidegate_agent_region_reachable",
    help: "1 when the last announce to the region was answered, 0 when it failed or none was made yet",
    registers,
    collect() {
      this.set(o.regionReachable() === true ? 1 : 0);
    },
  });
  return registry;
}

