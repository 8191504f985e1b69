import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { H1Pool, type H1Handler } from "./h1-stream.js";

const servers: net.Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

/** A server that answers every request with `reply` (written in pieces of `piece` bytes), counting connections. */
async function server(reply: string | Buffer, piece = Infinity, close = false): Promise<{ port: number; connections: () => number; requests: string[] }> {
  let connections = 0;
  const requests: string[] = [];
  const srv = net.createServer((s) => {
    connections++;
    let got = "";
    s.on("data", (c) => {
      got += c.toString("latin1");
      const end = got.indexOf("\r\n\r\n");
      if (end === -1) return;
      const len = Number(/content-length: (\d+)/i.exec(got)?.[1] ?? 0);
      if (got.length < end + 4 + len) return;
      requests.push(got);
      got = "";
      const bytes = typeof reply === "string" ? Buffer.from(reply, "latin1") : reply;
      const step = Math.min(piece, bytes.length);
      for (let i = 0; i < bytes.length; i += step) s.write(bytes.subarray(i, i + step));
      if (close) s.end();
    });
  });
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  return { port: (srv.address() as net.AddressInfo).port, connections: () => connections, requests };
}

/** Runs one request; resolves with what the handler saw. */
function run(pool: H1Pool, headMs = 2000): Promise<{ status: number; headers: ReadonlyMap<string, string>; body: string; err?: Error }> {
  return new Promise((resolve) => {
    let status = 0;
    let headers: ReadonlyMap<string, string> = new Map();
    const parts: Buffer[] = [];
    const h: H1Handler = {
      head: (s, hs) => {
        status = s;
        headers = hs;
      },
      body: (b) => parts.push(Buffer.from(b)),
      end: () => resolve({ status, headers, body: Buffer.concat(parts).toString("utf8") }),
      fail: (err) => resolve({ status, headers, body: Buffer.concat(parts).toString("utf8"), err }),
    };
    pool.request("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n", "{}", h, headMs);
  });
}

const SECOND = Buffer.from("\n\ndata: ünï", "utf8");
const CHUNKED = Buffer.concat([
  Buffer.from(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n7\r\ndata: a\r\n${SECOND.length.toString(16)};ext=1\r\n`, "latin1"),
  SECOND,
  Buffer.from("\r\n0\r\n\r\n", "latin1"),
]);

describe("H1Pool (the openai-http adapter's streamed requests)", () => {
  it("decodes a chunked body split at every byte, keeps the connection and reuses it", async () => {
    const srv = await server(CHUNKED, 1);
    const pool = new H1Pool("127.0.0.1", srv.port);
    for (let i = 0; i < 3; i++) {
      const r = await run(pool);
      expect(r.err).toBeUndefined();
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toBe("text/event-stream");
      expect(r.body).toBe("data: a\n\ndata: ünï");
    }
    expect(srv.connections()).toBe(1);
    expect(srv.requests[0]).toBe("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}");
    pool.close();
  });

  it("reads a body with a content-length, and a body to the close (no reuse after connection: close)", async () => {
    const sized = await server("HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\nconnection: close\r\n\r\n{\"error\":1}", 4);
    const pool = new H1Pool("127.0.0.1", sized.port);
    expect(await run(pool)).toMatchObject({ status: 400, body: '{"error":1}' });
    expect(await run(pool)).toMatchObject({ status: 400, body: '{"error":1}' });
    expect(sized.connections()).toBe(2);
    const toClose = await server("HTTP/1.1 200 OK\r\n\r\nall of it", Infinity, true);
    expect(await run(new H1Pool("127.0.0.1", toClose.port))).toMatchObject({ status: 200, body: "all of it" });
  });

  it("fails with node's socket error code, a head timeout, a bad chunk size, and a close mid-body", async () => {
    const free = await server("");
    const port = free.port;
    servers.pop()!.close();
    await new Promise((r) => setTimeout(r, 20));
    expect((await run(new H1Pool("127.0.0.1", port))).err).toMatchObject({ code: "ECONNREFUSED" });
    const silent = await server("");
    expect((await run(new H1Pool("127.0.0.1", silent.port), 100)).err?.message).toMatch(/no response headers within 100 ms/);
    const bad = await server("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n");
    expect((await run(new H1Pool("127.0.0.1", bad.port))).err?.message).toMatch(/bad chunk size/);
    const cut = await server("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab", Infinity, true);
    const r = await run(new H1Pool("127.0.0.1", cut.port));
    expect(r.body).toBe("ab");
    expect(r.err).toMatchObject({ code: "ECONNRESET" });
  });

  it("drops an idle connection the server closed, and opens a new one for the next request", async () => {
    const srv = await server(CHUNKED, Infinity, true);
    const pool = new H1Pool("127.0.0.1", srv.port);
    expect((await run(pool)).body).toBe("data: a\n\ndata: ünï");
    await new Promise((r) => setTimeout(r, 50));
    expect(pool.idleCount).toBe(0);
    expect((await run(pool)).body).toBe("data: a\n\ndata: ünï");
    expect(srv.connections()).toBe(2);
  });
});
