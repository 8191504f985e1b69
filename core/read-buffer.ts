/**
 * `net.connect`'s `onread` over one read buffer per process: the socket's reads land in it and go to `handle` as a
 * view of the bytes read, with no Buffer allocated, `Readable.push` or `'data'` event per read (~6% of the global
 * router's CPU and ~10% of the region's under bench:router: router/README.md "The dispatch connection"). Every read
 * is handled before the event loop runs the next, so one buffer serves every such socket; what a handler keeps past
 * its call it must copy. `handle` returning false pauses the socket until `socket.resume()`.
 * Used by the router's framed dispatch connection (region/link/mux-socket.ts) and the region's engine connections
 * (engines/openai-http/h1-stream.ts).
 */
import type { OnReadOpts } from "node:net";

const READ_BUFFER_BYTES = 64 * 1024;
let shared: Buffer | undefined;

/** The `onread` option that hands each read to `handle` (see the header). */
export function onreadInto(handle: (bytes: Buffer) => boolean): OnReadOpts {
  shared ??= Buffer.allocUnsafe(READ_BUFFER_BYTES);
  return { buffer: shared, callback: (n, buf) => handle((buf as Buffer).subarray(0, n)) };
}
