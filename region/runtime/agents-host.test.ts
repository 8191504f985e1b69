import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineInfo } from "../../nodes/agent/handle.js";
import { httpRole } from "./agents-host.js";

/** An engine whose /health answers `answer` (status, body). */
let server: Server;
let base = "";
let answer: [number, string] = [200, ""];
beforeAll(async () => {
  server = createServer((req, res) => {
    const [status, body] = req.url === "/health" ? answer : [404, ""];
    res.writeHead(status).end(body);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const info = (): EngineInfo => ({ instanceId: "i", model: "m", gpu: "g", gpus: 1, url: base, pid: 1, state: "running", startedAtMs: 0, detail: "" });

describe("an adopted engine's role, read from its /health", () => {
  it("is engine-sim's settings.role, none for an engine that answers without settings, and an error when it does not answer 200", async () => {
    answer = [200, JSON.stringify({ settings: { role: "decode" } })];
    expect(await httpRole(info())).toBe("decode");
    answer = [200, ""];
    expect(await httpRole(info())).toBeUndefined();
    // Not "none": the caller keeps the role the agent announced (engine-lifecycle.ts serveWhenHealthy).
    answer = [503, "starting"];
    await expect(httpRole(info())).rejects.toThrow(/health answered 503/);
  });
});
