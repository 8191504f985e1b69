/**
 * How long a scale-out of (model, gpu) takes, decision to serving: the last one measured in this region, else the
 * data plane's ideal time to move the model over one link (BlitzScale chain with one target: M/B at the policy's
 * link rate). The region's telemetry and the planner read it as the endpoint's expected scale-out time.
 */
import type { GpuType, ModelName } from "../../core/models.js";
import { idealSeconds } from "../../nodes/multicast/ideal.js";
import type { ModelParameters, MulticastPolicy } from "../pool/transfer.js";

export class ScaleOutTimes {
  /** Per endpoint `model/gpu`: the last measured scale-out, decision to serving (ms). */
  private readonly measuredMs = new Map<string, number>();

  constructor(
    private readonly models: ReadonlyMap<ModelName, ModelParameters>,
    private readonly policy: Pick<MulticastPolicy, "linkBytesPerS">,
  ) {}

  /** Records a scale-out that just finished, `tookMs` after its decision (held at ≥ 1 ms). */
  record(model: ModelName, gpu: GpuType, tookMs: number): void {
    // A host-cache hit with an engine in this process can serve within the clock's millisecond: it took under 1 ms,
    // not 0 (which the region's telemetry reads as "nothing measured").
    this.measuredMs.set(`${model}/${gpu}`, Math.max(1, tookMs));
  }

  /** The last measured, else the ideal transfer time (ms); undefined for a model the region does not host. */
  expected(model: ModelName, gpu: GpuType): number | undefined {
    const measured = this.measuredMs.get(`${model}/${gpu}`);
    if (measured !== undefined) return measured;
    const p = this.models.get(model);
    if (p === undefined) return undefined;
    return this.idealTransferMs(p);
  }

  /** The data plane's ideal time to move the model over one link (BlitzScale chain, one target: M/B), ms. */
  idealTransferMs(p: ModelParameters): number {
    return 1000 * idealSeconds("chain", { totalBytes: p.totalBytes, blockCount: p.blockCount, nodes: 2, linkBytesPerS: this.policy.linkBytesPerS });
  }
}
