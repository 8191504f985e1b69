/**
 * engine-sim's behaviour settings as its command-line flags (bin/commands/engine-sim.ts reads them): the one mapping
 * that a static region's spawned engines (region/runtime/build-sim-engine.ts engineSimFlags) and a node agent's
 * (region/agent/engine-supervisor.ts engineSimArgs, from StartEngine) both use, so the two cannot drift apart.
 */

/** The settings; unset = engine-sim's default (0 is a setting: no prefix cache, no host tier, no batch beside). */
export interface EngineSimBehaviour {
  maxBatch?: number | undefined;
  kvCapacityTokens?: number | undefined;
  preemption?: "recompute" | "swap" | "off" | undefined;
  batchSlotsBeside?: number | undefined;
  prefixBlockTokens?: number | undefined;
  hostKvCacheGiB?: number | undefined;
}

/** `--max-batch`, `--kv-capacity-tokens`, `--preemption`, `--batch-slots-beside`, `--prefix-block-tokens`, `--host-kv-cache-gib`, each only when set. */
export function engineSimBehaviourFlags(s: EngineSimBehaviour): string[] {
  const out: string[] = [];
  if (s.maxBatch !== undefined) out.push("--max-batch", String(s.maxBatch));
  if (s.kvCapacityTokens !== undefined) out.push("--kv-capacity-tokens", String(s.kvCapacityTokens));
  if (s.preemption !== undefined) out.push("--preemption", s.preemption);
  if (s.batchSlotsBeside !== undefined) out.push("--batch-slots-beside", String(s.batchSlotsBeside));
  if (s.prefixBlockTokens !== undefined) out.push("--prefix-block-tokens", String(s.prefixBlockTokens));
  if (s.hostKvCacheGiB !== undefined) out.push("--host-kv-cache-gib", String(s.hostKvCacheGiB));
  return out;
}
