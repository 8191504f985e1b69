/**
 * The region side of DispatchMux (region/proto/region.proto): many generations over one bidirectional stream.
 *
 * Each `open` runs `service.open` (the region's push path, core/push.ts) with its own AbortController; `cancel` aborts
 * it; the stream ending, failing or being cancelled aborts every request on it. Events of all requests that are ready in the same event-loop turn
 * (produced before the check phase) go out as ONE MuxDown message, a request's tokens of that turn merged into one
 * MuxEvent, so 32 streams finishing together cost one frame. When the transport is full (write returns false),
 * every request that delivers a token is asked to pause (its sink returns false) until 'drain': the stream's HTTP/2
 * flow control back-pressures all its generations together. A request ends with one event carrying `done` or `error` (the
 * TidegateError code and whether the first event had gone out); a cancelled request gets nothing more.
 *
 * A batch request (`GenerateRequest.batch`, sent by the queue manager) has no reader waiting on each token: its text
 * is kept here and goes out once, with its `done`, as one MuxEvent. A 512-token batch request then costs the link
 * one message instead of one per event-loop turn, so bulk batch traffic does not queue ahead of the telemetry and
 * interactive streams that share the region's HTTP/2 connection, nor take the router's CPU token by token.
 */
import { TidegateError, toTidegateError } from "../../core/errors.js";
import type { Logger } from "../../core/log.js";
import { doneToWire, requestFromWire, type WireMuxEvent, type WireMuxUp } from "./region-proto.js";
import type { RegionService } from "./service.js";
import type { EventSink, Flow } from "../../core/push.js";

/**
 * What serveMux serves: the gRPC DispatchMux call (grpc-js's ServerDuplexStream fits) or a framed connection
 * (mux-socket.ts). `data` carries one MuxUp; `end`, `cancelled`, `error` and `close` end it; `write` returns false
 * while the transport is full, until `drain`.
 */
export interface MuxServerCall {
  write(events: WireMuxEvent[]): boolean;
  end(): void;
  on(event: "data", fn: (up: WireMuxUp) => void): unknown;
  on(event: "end" | "cancelled" | "error" | "close", fn: () => void): unknown;
  once(event: "drain", fn: () => void): unknown;
}

/** Serves one DispatchMux stream until it ends; returns at once (the work runs on the stream's events). */
export function serveMux(service: RegionService, call: MuxServerCall, log: Logger): void {
  const running = new Map<number, AbortController>();
  let pending = new Map<number, WireMuxEvent>();
  let flushScheduled = false;
  /** True while the transport is full (write returned false) until its 'drain'. */
  let full = false;
  /** Requests whose engines were asked to pause while the transport was full; resumed at 'drain'. */
  const paused = new Set<Flow>();
  let closed = false;

  const onDrain = () => {
    full = false;
    const flows = [...paused];
    paused.clear();
    for (const f of flows) f.resume();
  };
  const flush = () => {
    flushScheduled = false;
    if (pending.size === 0 || closed) return;
    const events = [...pending.values()];
    pending = new Map();
    if (!call.write(events) && !full) {
      full = true;
      call.once("drain", onDrain);
    }
  };
  const entry = (rid: number): WireMuxEvent => {
    let ev = pending.get(rid);
    if (ev === undefined) {
      ev = { rid, texts: [], tokens: [], done: null, error: null };
      pending.set(rid, ev);
    }
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
    return ev;
  };
  const abortAll = (why: string) => {
    if (closed) return;
    closed = true;
    for (const ctl of running.values()) ctl.abort(new TidegateError("cancelled", why));
    running.clear();
    paused.clear();
  };

  /** Opens one request (the region's push path): its events go into the next frame as the engine delivers them. */
  const run = (rid: number, ctl: AbortController, up: WireMuxUp) => {
    let started = false;
    const end = () => {
      if (running.get(rid) === ctl) running.delete(rid);
    };
    const fail = (err: unknown) => {
      end();
      if (ctl.signal.aborted) return; // the caller cancelled or the stream is gone: nobody to tell
      const te = toTidegateError(err);
      if (te.code === "internal") log.error("dispatch failed", { err });
      entry(rid).error = { code: te.code, message: te.message, started };
    };
    let req: ReturnType<typeof requestFromWire>;
    try {
      req = requestFromWire(up.open!);
    } catch (err) {
      return fail(err);
    }
    // Batch: the text so far and its token count, sent with `done` (see the header).
    const held: string[] | undefined = req.batch === true ? [] : undefined;
    let heldTokens = 0;
    let flow: Flow | undefined;
    /** A pause asked for before `open` returned the flow to resume. */
    let pauseAsked = false;
    const sink: EventSink = {
      event(ev) {
        if (ctl.signal.aborted) return false;
        started = true;
        if (ev.type === "token" && held !== undefined) {
          held.push(ev.text);
          heldTokens += ev.tokens;
          return true;
        }
        const out = entry(rid);
        if (ev.type === "token") {
          out.texts.push(ev.text);
          out.tokens.push(ev.tokens);
          if (!full) return true;
          // The transport is full: this request's engine pauses until 'drain' (its flow, once open returned it).
          if (flow !== undefined) paused.add(flow);
          else pauseAsked = true;
          return false;
        }
        if (held !== undefined && held.length > 0) {
          out.texts.push(held.join(""));
          out.tokens.push(heldTokens);
        }
        out.done = doneToWire(ev);
        end();
        return true;
      },
      fail,
    };
    flow = service.open(req, sink, ctl.signal);
    if (pauseAsked) {
      if (full) paused.add(flow);
      else flow.resume();
    }
  };

  call.on("data", (up: WireMuxUp) => {
    if (closed) return;
    if (up.open === null || up.cancel) {
      const ctl = running.get(up.rid);
      running.delete(up.rid);
      pending.delete(up.rid);
      ctl?.abort(new TidegateError("cancelled", "the router cancelled the request"));
      return;
    }
    if (running.has(up.rid)) {
      entry(up.rid).error = { code: "invalid_request", message: `MuxUp.rid ${up.rid} is already open`, started: false };
      return;
    }
    const ctl = new AbortController();
    running.set(up.rid, ctl);
    run(up.rid, ctl, up);
  });
  call.on("end", () => {
    abortAll("the router closed the dispatch stream");
    call.end();
  });
  call.on("cancelled", () => abortAll("the dispatch stream was cancelled"));
  call.on("error", () => abortAll("the dispatch stream failed"));
  call.on("close", () => abortAll("the dispatch stream closed"));
}
