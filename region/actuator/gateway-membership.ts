/**
 * The `agents` actuator's side of the region's gateway (region/gateway/gateway.ts): an engine joins it when its
 * instance starts serving, is marked draining (no new requests; streams in flight finish), and leaves it, closed,
 * when its engine is stopped. Also lists the serving engines of an endpoint for serve-while-loading pairings.
 */
import type { GpuType, ModelName } from "../../core/models.js";
import type { Engine } from "../../core/ports.js";
import type { Gateway } from "../gateway/gateway.js";

export class GatewayMembership {
  constructor(private readonly gateway: Gateway) {}

  /** Routes to `engine` from now on (its instance serves). */
  add(gpu: GpuType, engine: Engine): void {
    this.gateway.addInstance(gpu, engine, "serving");
  }

  /** Stops routing new requests to the instance; its streams in flight go on. */
  drain(instanceId: string): void {
    this.gateway.setInstanceState(instanceId, "draining");
  }

  /** Whether the instance is in the gateway. */
  has(instanceId: string): boolean {
    return this.gateway.instances().some((i) => i.instanceId === instanceId);
  }

  /** Requests of the instance in flight; undefined when it is not in the gateway. */
  inFlight(instanceId: string): number | undefined {
    return this.gateway.instances().find((i) => i.instanceId === instanceId)?.inFlight;
  }

  /** Takes the instance out of the gateway and closes its engine (a close error is ignored: the engine is going). */
  async remove(instanceId: string): Promise<void> {
    await this.gateway.removeInstance(instanceId).close().catch(() => undefined);
  }

  /** The serving instances of (model, gpu) with their engines and requests in flight (live pairing's sources). */
  serving(model: ModelName, gpu: GpuType): { instanceId: string; engine: Engine; inFlight: number }[] {
    return this.gateway
      .instances()
      .filter((i) => i.model === model && i.gpu === gpu && i.state === "serving")
      .flatMap((i) => {
        const engine = this.gateway.engine(i.instanceId);
        return engine === undefined ? [] : [{ instanceId: i.instanceId, engine, inFlight: i.inFlight }];
      });
  }
}
