/**
 * The boundary watch of a gRPC port (what every tidegate gRPC server reports as refusals: the region's link server,
 * region/link/grpc-server.ts, and the node agent's, nodes/agent/agent-server.ts): undecodable messages, oversized
 * ones, HTTP/2 protocol errors, rapid resets and unanswered pings, counted through core/boundary.ts.
 */
import type { Http2Server, Http2Session, IncomingHttpHeaders, OutgoingHttpHeaders, ServerHttp2Stream, ServerStreamResponseOptions } from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { GRPC_REFUSALS, type BoundaryReporter } from "./boundary.js";
import type { Clock, Timer } from "./clock.js";

/** Streams of one HTTP/2 session ended by RST_STREAM within one second at which the session counts as a rapid reset. */
export const RAPID_RESET_PER_S = 200;

/**
 * What a gRPC port refuses, reported through `boundary` under port label `port`. grpc-js surfaces none of it (it
 * answers a message it cannot decode from below its interceptors), so `watch(server)`, called after bind, listens on
 * grpc-js's http2 servers:
 * - the status each stream ends with (its `respond`/`sendTrailers`): grpc-js ends a call whose message fails to
 *   decode with INTERNAL "Error deserializing request" (`undecodable_message`) and one over the receive limit with
 *   RESOURCE_EXHAUSTED "Received message larger than max…" (`message_too_large`);
 * - a `sessionError` with nghttp2's "bad client
 *   magic" (random bytes, an HTTP/1 request, a wrong preface) is `bad_preface`; any other session error is
 *   `protocol_error`, or `rapid_reset` when ≥ RAPID_RESET_PER_S of the session's streams ended in RST_STREAM (nearly always the peer's) in the
 *   last second (CVE-2023-44487; Node's own limit then ends the session). A session that keeps resetting at that
 *   rate without Node ending it is reported too, once per second.
 * - a session that does not answer a PING within SESSION_PING_ACK_MS is `unanswered_ping`, and is destroyed. Every
 *   session is pinged SESSION_FIRST_PING_MS after it starts and then every SESSION_PING_EVERY_MS. This is how a frame
 *   over SETTINGS_MAX_FRAME_SIZE shows: nghttp2 answers it with GOAWAY(FRAME_SIZE_ERROR) inside Node, no JS event
 *   fires, and the session stays open (nothing more is sent on it, a ping included) until the peer closes it. A peer
 *   that hung looks the same. gRPC clients answer pings from their HTTP/2 layer, busy or not.
 */
export const SESSION_FIRST_PING_MS = 2_000;
export const SESSION_PING_EVERY_MS = 10_000;
export const SESSION_PING_ACK_MS = 10_000;

export function grpcBoundary(boundary: BoundaryReporter, port: string, clock: Clock): { watch(server: grpc.Server): void } {
  boundary.declare(port, GRPC_REFUSALS);
  const watch = (server: grpc.Server) => {
    const http2Servers = Reflect.get(server, "http2Servers") as Map<Http2Server, unknown> | undefined;
    for (const h of http2Servers?.keys() ?? []) {
      const resets = new WeakMap<Http2Session, { windowStartMs: number; inWindow: number; reported: boolean; rapid: boolean }>();
      // The address is read when the session starts: once it errs, its socket may be gone.
      const peers = new WeakMap<Http2Session, string | undefined>();
      const peerOf = (session: Http2Session) => (peers.has(session) ? peers.get(session) : session.socket?.remoteAddress);
      h.on("session", (session: Http2Session) => {
        peers.set(session, session.socket?.remoteAddress);
        pingWatch(session, () => {
          boundary.refuse(port, "unanswered_ping", peerOf(session), `no PING ack within ${SESSION_PING_ACK_MS} ms (a frame nghttp2 refused with GOAWAY, e.g. over SETTINGS_MAX_FRAME_SIZE, or a hung peer); session closed`);
          session.destroy();
        });
      });
      const resetsOf = (session: Http2Session) => {
        let r = resets.get(session);
        if (r === undefined) resets.set(session, (r = { windowStartMs: clock.now(), inWindow: 0, reported: false, rapid: false }));
        const now = clock.now();
        if (now - r.windowStartMs >= 1000) {
          r.windowStartMs = now;
          r.inWindow = 0;
          r.reported = false;
        }
        return r;
      };
      h.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
        const path = String(headers[":path"] ?? "");
        const session = stream.session; // unset once the stream is destroyed
        const judge = (trailers: OutgoingHttpHeaders | undefined) => {
          const code = Number(trailers?.["grpc-status"]); // grpc-js sets a number; a string would do too
          if (code !== grpc.status.INTERNAL && code !== grpc.status.RESOURCE_EXHAUSTED) return;
          let details = String(trailers?.["grpc-message"] ?? "");
          try {
            details = decodeURIComponent(details);
          } catch {
            // not percent-encoded: read as it is
          }
          const peer = session === undefined ? undefined : peerOf(session);
          if (code === grpc.status.INTERNAL && details.startsWith("Error deserializing request")) boundary.refuse(port, "undecodable_message", peer, path);
          else if (code === grpc.status.RESOURCE_EXHAUSTED && details.startsWith("Received message")) boundary.refuse(port, "message_too_large", peer, `${path}: ${details}`);
        };
        const respond = stream.respond.bind(stream);
        stream.respond = (h?: OutgoingHttpHeaders, o?: ServerStreamResponseOptions) => {
          if (o?.endStream === true) judge(h);
          respond(h, o);
        };
        const sendTrailers = stream.sendTrailers.bind(stream);
        stream.sendTrailers = (t: OutgoingHttpHeaders) => {
          judge(t);
          sendTrailers(t);
        };
        // A stream the peer reset (RST_STREAM with an error code) before it ended.
        stream.once("close", () => {
          if (stream.rstCode === 0 || stream.rstCode === undefined || session === undefined) return;
          const r = resetsOf(session);
          r.inWindow++;
          if (r.inWindow >= RAPID_RESET_PER_S && !r.reported) {
            r.reported = true;
            r.rapid = true;
            boundary.refuse(port, "rapid_reset", peerOf(session), `${r.inWindow} streams reset within 1 s`);
          }
        });
      });
      h.on("sessionError", (err: Error, session: Http2Session) => {
        const peer = peerOf(session);
        if (/bad client magic/i.test(err.message)) return boundary.refuse(port, "bad_preface", peer, err.message);
        const r = resetsOf(session);
        if (r.rapid) return; // reported when its resets crossed the limit: this is how Node ended it
        if (r.inWindow >= RAPID_RESET_PER_S / 2) return boundary.refuse(port, "rapid_reset", peer, `${err.message} after ${r.inWindow} streams reset within 1 s`);
        boundary.refuse(port, "protocol_error", peer, err.message);
      });
    }
  };
  /** Pings `session` on the schedule above; `dead` runs once if an ack does not come in time. */
  const pingWatch = (session: Http2Session, dead: () => void) => {
    let next: Timer | undefined;
    let deadline: Timer | undefined;
    const ping = () => {
      if (session.destroyed || session.closed) return;
      // The callback also runs (with an error) when the session closes first: nothing more is then scheduled.
      const sent = session.ping(() => {
        deadline?.cancel();
        if (!session.destroyed && !session.closed) next = clock.after(SESSION_PING_EVERY_MS, ping);
      });
      if (!sent) return void (next = clock.after(SESSION_PING_EVERY_MS, ping)); // too many outstanding: ask later
      deadline = clock.after(SESSION_PING_ACK_MS, () => {
        if (!session.destroyed && !session.closed) dead();
      });
    };
    next = clock.after(SESSION_FIRST_PING_MS, ping);
    session.once("close", () => {
      next?.cancel();
      deadline?.cancel();
    });
  };
  return { watch };
}

