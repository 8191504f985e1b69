/**
 * Boundary refusals (issue 32): what a tier's ports refuse from the network — garbage bytes, a bad HTTP/2 preface,
 * a frame too large, a message that does not decode, a burst of stream resets, a bad data-plane handshake — is
 * counted in `tidegate_boundary_refused_total{port,reason}` and logged as one warning
 * `"boundary refused"` {port, reason, peer, detail, suppressed} per (port, peer address, reason) at most every
 * `intervalMs` (default 60 s). `suppressed` is how many refusals of that key were not logged since its last line.
 *
 * Memory is bounded: at most `maxPeers` (default 1,024) keys are remembered, least recently refused dropped first
 * (their unlogged counts are then only in the counter). Time comes from the injected Clock, so the rate limit is
 * testable on a fake clock. The peer is an address without its port (every connection of one host counts once).
 */
import type { Clock } from "./clock.js";
import type { Logger } from "./log.js";
import { Counter, initLabels, type Registry } from "./metrics.js";

/** Reasons a gRPC port refuses (region and agent gRPC servers: region/link/grpc-server.ts, nodes/agent/agent-server.ts). */
export const GRPC_REFUSALS = ["bad_preface", "protocol_error", "rapid_reset", "undecodable_message", "message_too_large", "unanswered_ping"] as const;
/** Reasons the native data port refuses (native/README.md "Boundary refusals"). */
export const DATA_REFUSALS = ["bad_magic", "bad_handshake", "handshake_timeout", "frame_too_large", "bad_frame", "too_many_connections"] as const;

export const REFUSED_METRIC = "tidegate_boundary_refused_total";

export interface BoundaryReporterOptions {
  clock: Clock;
  log: Logger;
  /** The registry the process serves on /metrics; absent: refusals are only logged. */
  registry?: Registry;
  /** Least time between two lines of one (port, peer, reason), ms (default 60,000). */
  intervalMs?: number;
  /** Most (port, peer, reason) keys remembered (default 1,024). */
  maxPeers?: number;
}

interface KeyState {
  lastLoggedMs: number;
  suppressed: number;
}

/** Strips a port from "1.2.3.4:5678", "[::1]:5678", "ipv4:1.2.3.4:5678"; "" → "unknown". */
export function peerHost(peer: string | undefined): string {
  if (peer === undefined || peer === "") return "unknown";
  let p = peer.replace(/^ipv[46]:/, "");
  const bracket = /^\[([^\]]+)\](?::\d+)?$/.exec(p);
  if (bracket !== null) return bracket[1]!;
  // One colon: host:port. More: a bare IPv6 address (no port can be told apart without brackets).
  if (p.indexOf(":") === p.lastIndexOf(":")) p = p.replace(/:\d+$/, "");
  return p === "" ? "unknown" : p;
}

/** The process's boundary-refusal reporter: one per registry (see the module comment for the contract). */
export class BoundaryReporter {
  private readonly intervalMs: number;
  private readonly maxPeers: number;
  private readonly keys = new Map<string, KeyState>();
  private readonly counter: Counter<"port" | "reason"> | undefined;

  constructor(private readonly o: BoundaryReporterOptions) {
    this.intervalMs = o.intervalMs ?? 60_000;
    this.maxPeers = o.maxPeers ?? 1024;
    if (!(this.intervalMs >= 0) || !Number.isInteger(this.maxPeers) || this.maxPeers < 1) throw new RangeError("BoundaryReporter: intervalMs must be ≥ 0 and maxPeers an integer ≥ 1");
    if (o.registry !== undefined) {
      // One counter per registry: a second reporter on the same registry (tidegate dev's regions) shares it.
      const existing = o.registry.getSingleMetric(REFUSED_METRIC);
      this.counter =
        (existing as Counter<"port" | "reason"> | undefined) ??
        new Counter({ name: REFUSED_METRIC, help: "Connections, frames or calls a tier's port refused (garbage, bad preface or handshake, oversized or undecodable, rapid reset, an unanswered ping), by port and reason", labelNames: ["port", "reason"], registers: [o.registry] });
    }
  }

  /** Starts every (port, reason) series at 0, so rates and alerts work from the first scrape. */
  declare(port: string, reasons: readonly string[]): void {
    if (this.counter !== undefined) initLabels(this.counter, { port: [port], reason: reasons });
  }

  /** Keys remembered now (≤ maxPeers). */
  get trackedKeys(): number {
    return this.keys.size;
  }

  /**
   * Records `count` (≥ 1) refusals of `reason` on `port` from `peer` (any address form; its port is dropped). Logs
   * one warning unless this (port, peer, reason) was logged less than `intervalMs` ago.
   */
  refuse(port: string, reason: string, peer: string | undefined, detail = "", count = 1): void {
    if (!(count >= 1)) return;
    this.counter?.inc({ port, reason }, count);
    const host = peerHost(peer);
    const key = `${port}\u0000${reason}\u0000${host}`;
    const now = this.o.clock.now();
    const st = this.keys.get(key);
    if (st !== undefined) {
      this.keys.delete(key); // re-inserted below: the map's order is least recently refused first
      if (now - st.lastLoggedMs < this.intervalMs) {
        st.suppressed += count;
        this.keys.set(key, st);
        return;
      }
    }
    const suppressed = st?.suppressed ?? 0;
    this.keys.set(key, { lastLoggedMs: now, suppressed: 0 });
    while (this.keys.size > this.maxPeers) this.keys.delete(this.keys.keys().next().value!);
    this.o.log.warn("boundary refused", { port, reason, peer: host, ...(detail === "" ? {} : { detail }), suppressed, ...(count > 1 ? { count } : {}) });
  }
}
