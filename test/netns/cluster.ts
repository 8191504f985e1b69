/**
 * A region cluster across network namespaces for tests: `createTopology` (tbf-shaped links on one bridge), one
 * `tidegate agent` per namespace and `tidegate region` (agents mode) on the bridge's host side (test/region/cluster.ts),
 * started until `model` serves its first instances; `close()` stops every process and removes the namespaces and
 * the temporary directory, whatever failed.
 */
import { afterAll, beforeAll } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stopAll } from "../e2e/procs.js";
import { Cluster } from "../region/cluster.js";
import { createTopology, type Topology } from "./topology.js";

export interface NetnsCluster {
  topo: Topology;
  cluster: Cluster;
  close(): Promise<void>;
}

export async function startNetnsCluster(o: { rates: number[]; region: string; config: Record<string, unknown>; slots: number; model: string; serving: number; name: string; withGlobal?: boolean }): Promise<NetnsCluster> {
  const topo = createTopology(o.rates, 9000);
  const dir = mkdtempSync(join(tmpdir(), `tidegate-netns-${o.name}-`));
  const cluster = new Cluster({ dir, region: o.region, regionHost: topo.hostIp, config: o.config, agents: topo.nodes.map((n) => ({ nodeId: n.name, ns: n.ns, host: n.ip, slots: o.slots, readyMs: 90_000 })), ...(o.withGlobal === true ? { withGlobal: true } : {}) });
  const close = async () => {
    try {
      await cluster.stop();
      await stopAll();
    } finally {
      topo.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    await cluster.start();
    await cluster.serving(o.model, o.serving, 120_000);
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
  return { topo, cluster, close };
}

/**
 * Registers the suite's beforeAll (start, 180 s) and afterAll (close) for one cluster; returns its getter. `config`
 * gets the one region `r1` with `gpus` GPUs of `gpu` serving `model` (TP `tp`, 1 instance, at most `max`) and
 * whatever `extra` adds (controller, engines, parameters).
 */
export function netnsClusterSuite(o: { name: string; rates: number[]; model: string; gpu: string; tp: number; max: number; extra: Record<string, unknown> }): () => Cluster {
  let n: NetnsCluster | undefined;
  beforeAll(async () => {
    n = await startNetnsCluster({
      name: o.name,
      rates: o.rates,
      region: "r1",
      slots: o.tp,
      model: o.model,
      serving: 1,
      config: {
        models: [{ name: o.model, gpusPerInstance: { [o.gpu]: o.tp } }],
        regions: [{ name: "r1", gpus: [{ type: o.gpu, count: o.tp * o.rates.length }], endpoints: [{ model: o.model, gpu: o.gpu, instances: 1, minInstances: 1, maxInstances: o.max }] }],
        ...o.extra,
      },
    });
  }, 180_000);
  afterAll(async () => {
    await n?.close();
  });
  return () => {
    if (n === undefined) throw new Error(`the ${o.name} cluster did not start`);
    return n.cluster;
  };
}
