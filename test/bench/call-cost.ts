/**
 * Diagnostic for bench:router: the CPU one request costs in call setup alone, on each kind of hop, measured in this
 * process with client and server both in it (so the figure covers both ends) and one token per call:
 * - a gRPC Dispatch call through the real RegionLink adapters (GrpcRegionLink → startRegionGrpcServer) to a stub
 *   RegionService that yields one token and done;
 * - an HTTP/1.1 keep-alive POST with a two-event SSE answer (node:http both sides), the shape of the region →
 *   engine-sim hop.
 * Each is warmed up, then run `calls` times back to back; figures are process CPU (user + system) and wall time
 * per call. Per-token cost of a stream of n tokens includes (call CPU) / n.
 */
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import type { GenerateRequest } from "../../core/ports.js";
import { NO_FLOW, type EventSink, type Flow } from "../../core/push.js";
import { GrpcRegionLink } from "../../region/link/grpc-client.js";
import { startRegionGrpcServer } from "../../region/link/grpc-server.js";
import type { RegionService } from "../../region/link/service.js";

export interface CallCost {
  cpuUsPerCall: number;
  wallMsPerCall: number;
}

async function measure(calls: number, one: (i: number) => Promise<void>): Promise<CallCost> {
  for (let i = 0; i < Math.min(200, calls); i++) await one(i);
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await one(i);
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const c = process.cpuUsage(c0);
  return { cpuUsPerCall: (c.user + c.system) / calls, wallMsPerCall: wallMs / calls };
}

/** CPU and wall time per gRPC Dispatch call (one token), client and server in this process. */
export async function grpcDispatchCallCost(model: string, calls: number): Promise<CallCost> {
  const service: RegionService = {
    region: "call-cost",
    snapshot: () => {
      throw new Error("not used");
    },
    listing: () => {
      throw new Error("not used");
    },
    acceptTargets: () => {
      throw new Error("not used");
    },
    open(req: GenerateRequest, sink: EventSink): Flow {
      sink.event({ type: "token", text: " tide", tokens: 1 });
      sink.event({ type: "done", finishReason: "length", usage: { prompt_tokens: req.promptTokens, completion_tokens: 1, total_tokens: req.promptTokens + 1 } });
      return NO_FLOW;
    },
  };
  const server = await startRegionGrpcServer(service);
  const link = new GrpcRegionLink({ region: "call-cost", address: server.address });
  try {
    return await measure(calls, async (i) => {
      const req: GenerateRequest = { id: `cmpl-cost${i}`, model, kind: "completion", promptTokens: 8, maxTokens: 50, priority: 0, body: { prompt: "The tide gate opens at dawn and", max_tokens: 50 } };
      for await (const ev of link.dispatch(req)) if (ev.type === "done") break;
    });
  } finally {
    await link.close();
    await server.close();
  }
}

/** CPU and wall time per HTTP/1.1 keep-alive POST answered with two SSE events, both ends in this process. */
export async function http1RequestCost(calls: number): Promise<CallCost> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"text":" tide"}]}\n\n');
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true });
  const body = JSON.stringify({ model: "m", prompt: "The tide gate opens at dawn and", max_tokens: 50, stream: true });
  try {
    return await measure(
      calls,
      () =>
        new Promise<void>((resolve, reject) => {
          const q = request({ agent, host: "127.0.0.1", port, path: "/v1/completions", method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
            res.on("data", () => undefined);
            res.on("end", resolve);
            res.on("error", reject);
          });
          q.on("error", reject);
          q.end(body);
        }),
    );
  } finally {
    agent.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  }
}
