/**
 * DataPlaneError: the one error class the native data plane throws or reports. The addon receives this class at
 * load time (`init`) and constructs it in C++, so `instanceof` works across the boundary. `reason` is the stable
 * machine-readable cause; `peer` names the node at fault and `block` the block, when there is one.
 */
import { TidegateError, type ErrorCode } from "../core/errors.js";

/** Why a data plane operation failed. */
export type DataPlaneReason =
  | "peer_unreachable" // a peer could not be dialed before any block moved
  | "peer_failed" // a peer closed or reset its connection mid-transfer
  | "peer_stalled" // nothing heard from a peer for stallMs (default 1000 ms)
  | "checksum_mismatch" // a block arrived with the wrong checksum
  | "cancelled" // the caller cancelled the transfer
  | "invalid_plan" // the plan or role cannot run (cycle, duplicate, zero blocks, block never arriving ...)
  | "over_memory" // the model does not fit in the node's memory
  | "closed" // a store or endpoint was used after close()
  | "busy" // an endpoint already runs a transfer
  | "unavailable" // the transport asked for cannot run here (verbs with no usable RDMA device)
  | "io"; // a local system call failed (bind, read a file)

const CODE_OF: Record<DataPlaneReason, ErrorCode> = {
  peer_unreachable: "upstream_error",
  peer_failed: "upstream_error",
  peer_stalled: "timeout",
  checksum_mismatch: "upstream_error",
  cancelled: "cancelled",
  invalid_plan: "invalid_request",
  over_memory: "payload_too_large",
  closed: "invalid_request",
  busy: "conflict",
  unavailable: "invalid_config",
  io: "internal",
};

/** Details the addon attaches to an error. */
export interface DataPlaneErrorDetails {
  peer?: string;
  block?: number;
}

/** A data-plane failure: `reason` (stable), `peer` and `block` at fault when known; `code` maps it to HTTP/gRPC. */
export class DataPlaneError extends TidegateError {
  readonly reason: DataPlaneReason;
  readonly peer: string | undefined;
  readonly block: number | undefined;

  constructor(reason: string, message: string, details: DataPlaneErrorDetails = {}) {
    const r: DataPlaneReason = reason in CODE_OF ? (reason as DataPlaneReason) : "io";
    super(CODE_OF[r], message);
    this.name = "DataPlaneError";
    this.reason = r;
    this.peer = details.peer;
    this.block = details.block;
  }
}

/** True when `err` is a DataPlaneError (optionally with the given reason). */
export function isDataPlaneError(err: unknown, reason?: DataPlaneReason): err is DataPlaneError {
  return err instanceof DataPlaneError && (reason === undefined || err.reason === reason);
}
