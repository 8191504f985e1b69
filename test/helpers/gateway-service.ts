/**
 * A bare Gateway served as a region (link and router tests with hand-made gateways): its routing and telemetry, a
 * TargetsStore of its own (the one decisionId rule, as the region runtime holds it) and a listing of its instances.
 * Real regions serve their runtime's service (region/runtime/build-region.ts); the gateway itself only routes.
 */
import type { Clock } from "../../core/clock.js";
import type { Gateway } from "../../region/gateway/gateway.js";
import type { RegionService } from "../../region/link/service.js";
import { TargetsStore } from "../../region/runtime/targets.js";

const services = new WeakMap<Gateway, RegionService & { targets: TargetsStore }>();

/**
 * The service of `gw` (the same object for the same gateway, so a test can read the targets it acknowledged);
 * `clock` is the gateway's, for the listing's `forMs` (default: wall time).
 */
export function gatewayService(gw: Gateway, clock?: Pick<Clock, "now">): RegionService & { targets: TargetsStore } {
  let s = services.get(gw);
  if (s === undefined) {
    const targets = new TargetsStore(gw.region);
    s = {
      region: gw.region,
      targets,
      snapshot: () => gw.snapshot(),
      open: (req, sink, signal) => gw.open(req, sink, signal),
      acceptTargets: (t) => targets.accept(t),
      listing: () => ({
        region: gw.region,
        actuator: "static",
        instances: gw.instances().map((i) => ({ id: i.instanceId, model: i.model, gpu: i.gpu, gpus: 0, state: i.state, node: "", enteredAtMs: i.enteredAtMs, forMs: Math.max(0, (clock?.now() ?? Date.now()) - i.enteredAtMs), detail: i.stale ? "stats stale" : "", url: "", role: i.role })),
        nodes: [],
        failures: [],
        actions: [],
      }),
      onChange: (cb) => gw.onChange(cb),
    };
    services.set(gw, s);
  }
  return s;
}
