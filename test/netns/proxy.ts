/**
 * A TCP relay that flips one byte of the first connection's client→server stream at a chosen offset: a block
 * corrupted on the wire, for the checksum tests. Listens on `host` (port 0), forwards to `to`.
 */
import { createServer, connect, type Server, type Socket } from "node:net";

/** A running relay; close() drops its connections and the listener. */
export interface CorruptingProxy {
  port: number;
  close(): Promise<void>;
}

/** Starts a relay that flips byte `flipAtByte` of the first connection's client → server stream. */
export async function corruptingProxy(host: string, to: { host: string; port: number }, flipAtByte: number): Promise<CorruptingProxy> {
  const sockets = new Set<Socket>();
  let first = true;
  const server: Server = createServer((client) => {
    const corrupt = first;
    first = false;
    const upstream = connect(to.port, to.host);
    sockets.add(client).add(upstream);
    let offset = 0;
    client.on("data", (chunk: Buffer) => {
      if (corrupt && offset <= flipAtByte && flipAtByte < offset + chunk.length) chunk.writeUInt8(chunk.readUInt8(flipAtByte - offset) ^ 0xff, flipAtByte - offset);
      offset += chunk.length;
      if (!upstream.write(chunk)) client.pause();
    });
    upstream.on("drain", () => client.resume());
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const addr = server.address();
  return {
    port: typeof addr === "object" && addr !== null ? addr.port : 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
