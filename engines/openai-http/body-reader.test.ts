import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { BodyReader } from "./body-reader.js";

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server === undefined ? r() : server.close(() => r())));
  server = undefined;
});

/** Serves one response written by `write`; resolves with the client's IncomingMessage. */
async function respond(write: (socketEnd: () => void, res: import("node:http").ServerResponse) => void): Promise<IncomingMessage> {
  server = createServer((req, res) => write(() => req.socket.destroy(), res));
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/", agent: false }, resolve);
    req.on("error", reject);
    req.end();
  });
}

async function readAll(r: BodyReader): Promise<string> {
  let out = "";
  for (;;) {
    const b = r.shift() ?? (await r.next());
    if (b === undefined) return out;
    out += b.toString("utf8");
  }
}

describe("BodyReader", () => {
  it("yields every chunk in order, then undefined at the end", async () => {
    const res = await respond((_end, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      let i = 0;
      const tick = () => {
        if (i === 200) return res.end("end");
        res.write(`${i++},`);
        if (i % 50 === 0) setTimeout(tick, 2);
        else tick();
      };
      tick();
    });
    const reader = new BodyReader(res);
    const text = await readAll(reader);
    expect(text).toBe(Array.from({ length: 200 }, (_, i) => `${i},`).join("") + "end");
    expect(await reader.next()).toBeUndefined();
  });

  it("rejects when the connection closes before the body ends", async () => {
    const res = await respond((destroy, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("partial");
      setTimeout(destroy, 20);
    });
    const reader = new BodyReader(res);
    await expect(readAll(reader)).rejects.toThrow();
  });

  it("pauses a body nobody reads and resumes once the queue drains", async () => {
    const big = "x".repeat(1024);
    const res = await respond((_end, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      let n = 0;
      const more = () => {
        while (n < 400) {
          n++;
          if (!res.write(big)) return void res.once("drain", more);
        }
        res.end();
      };
      more();
    });
    const reader = new BodyReader(res);
    await new Promise((r) => setTimeout(r, 100));
    expect(res.isPaused()).toBe(true);
    const text = await readAll(reader);
    expect(text.length).toBe(400 * 1024);
  });
});
