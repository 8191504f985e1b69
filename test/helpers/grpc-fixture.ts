/**
 * Test fixture for the gRPC RegionLink suites (grpc.test.ts, mux.test.ts): fake-engine regions, servers and links
 * that are closed after each test, and small async helpers. Call `useGrpcFixture()` at the top level of a test file.
 */
import { afterEach } from "vitest";
import { WallClock } from "../../core/clock.js";
import type { EngineEvent, GenerateRequest } from "../../core/ports.js";
import type { FakeEngine } from "./fake-engine.js";
import { Gateway } from "../../region/gateway/gateway.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import { startRegionGrpcServer, type RegionGrpcServer } from "../../region/link/grpc-server.js";
export { collect, errorOf } from "./streams.js";
import { gatewayService } from "./gateway-service.js";

export const MODEL = "llama3.1-8b";
export const clock = new WallClock();

export interface GrpcFixture {
  /** Registers a cleanup run (in reverse order) after the current test. */
  cleanup(fn: () => Promise<void> | void): void;
  /** A chat request for MODEL with a fresh id (`<idPrefix>-N`). */
  request(over?: Partial<GenerateRequest>): GenerateRequest;
  /** A Gateway serving `engines` on h100-80gb. */
  region(engines: FakeEngine[], name?: string): Gateway;
  /** Serves `gw` as a region (gateway-service.ts: its targets at `gatewayService(gw).targets`). */
  serve(gw: Gateway, address?: string): Promise<RegionGrpcServer>;
  /** A link to `address` with fast telemetry (50 ms) and reconnects (50–200 ms). */
  link(address: string, extra?: Partial<ConstructorParameters<typeof GrpcRegionLink>[0]>): GrpcRegionLink;
}

export function useGrpcFixture(idPrefix: string): GrpcFixture {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  let n = 0;
  return {
    cleanup: (fn) => void cleanups.push(fn),
    request: (over = {}) => ({ id: `${idPrefix}-${n++}`, model: MODEL, kind: "chat", promptTokens: 12, maxTokens: 4, priority: 0, body: { model: MODEL, messages: [{ role: "user", content: "hi" }] }, ...over }),
    region: (engines, name = "us-east") => {
      const gw = new Gateway({ region: name, clock });
      for (const e of engines) gw.addInstance("h100-80gb", e);
      return gw;
    },
    serve: async (gw, address) => {
      const server = await startRegionGrpcServer(gatewayService(gw, clock), address === undefined ? {} : { address });
      cleanups.push(() => server.close());
      return server;
    },
    link: (address, extra = {}) => {
      const l = new GrpcRegionLink({ region: "us-east", address, telemetryIntervalMs: 50, reconnectInitialMs: 50, reconnectMaxMs: 200, ...extra });
      cleanups.push(() => l.close());
      return l;
    },
  };
}

/** Polls `cond` every 10 ms for at most `limitMs`. */
export async function until(cond: () => boolean, limitMs = 5000): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > limitMs) throw new Error("condition not met in time");
    await clock.sleep(10);
  }
}
