import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ChunkWriter } from "./chunk-writer.js";

const EVENTS = ["data: {\"a\":1}\n\n", "data: {\"text\":\"é — ü\"}\n\n", "data: [DONE]\n\n"];

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

/** A server answering every request with EVENTS, written by `write` (each event after a macrotask). */
async function serve(write: "chunk-writer" | "res.write", delayFirstMs = 0): Promise<number> {
  let n = 0;
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const nth = n++;
    req.resume();
    void (async () => {
      if (nth === 0 && delayFirstMs > 0) await new Promise((r) => setTimeout(r, delayFirstMs));
      res.writeHead(200, { "content-type": "text/event-stream", date: "x" });
      const w = new ChunkWriter(res);
      for (const e of EVENTS) {
        const ok = write === "chunk-writer" ? w.write(e) : res.write(e);
        if (!ok) await w.drained();
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    })();
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  return (server.address() as { port: number }).port;
}

/** Sends `raw` on one connection and returns everything the server sent until `until` matches or it closes. */
function exchange(port: number, raw: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, "127.0.0.1");
    let got = "";
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      got += d;
      if (until.test(got)) {
        sock.destroy();
        resolve(got);
      }
    });
    sock.on("error", reject);
    sock.on("close", () => resolve(got));
    sock.write(raw);
  });
}

const POST = "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n";
const LAST_CHUNK = /0\r\n\r\n$/;

describe("ChunkWriter", () => {
  it("sends the bytes res.write sends: the same chunked framing, multi-byte UTF-8 lengths included", async () => {
    const viaRes = await exchange(await serve("res.write"), POST, LAST_CHUNK);
    server!.close();
    const viaWriter = await exchange(await serve("chunk-writer"), POST, LAST_CHUNK);
    expect(viaWriter).toBe(viaRes);
    expect(viaWriter).toContain(`${Buffer.byteLength(EVENTS[1]!).toString(16)}\r\n${EVENTS[1]}\r\n`);
  });

  it("an HTTP/1.0 client (no chunked encoding) gets the events unframed, as from res.write", async () => {
    const body = (await exchange(await serve("chunk-writer"), "POST / HTTP/1.0\r\ncontent-length: 0\r\n\r\n", /\[DONE\]\n\n$/)).split("\r\n\r\n").slice(1).join("\r\n\r\n");
    expect(body).toBe(EVENTS.join(""));
  });

  it("pipelined requests: the second response's events wait for the first response to finish", async () => {
    const port = await serve("chunk-writer", 50);
    const got = await exchange(port, POST + POST, /0\r\n\r\n[\s\S]*0\r\n\r\n$/);
    const responses = got.split("HTTP/1.1 200 OK").slice(1);
    expect(responses).toHaveLength(2);
    for (const r of responses) expect(r.split("\r\n\r\n").slice(1).join("\r\n\r\n")).toBe(EVENTS.map((e) => `${Buffer.byteLength(e).toString(16)}\r\n${e}\r\n`).join("") + "0\r\n\r\n");
  });
});
