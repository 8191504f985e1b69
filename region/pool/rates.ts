/**
 * The data plane's measured receive rate per node: what the region's multicast planner orders chain targets by once
 * a node has received a model (BlitzScale §5.1, Algorithm 1 lines 4–12: targets fastest first). Each completed
 * transfer records, per target, the bytes it received over its own first-byte → last-byte span (the node's run
 * profile, one host's clock; region/pool/transfer.ts). The latest measurement replaces the last one. In a chain a
 * target receives at most at its upstream's rate, so a measured rate is a lower bound on the node's inbound link.
 */
export class LinkRates {
  private readonly byNode = new Map<string, number>();

  /** Records that `nodeId` received `bytes` between its first and last byte, `spanMs` apart (spans < 1 ms are ignored). */
  observe(nodeId: string, bytes: number, spanMs: number): void {
    if (bytes > 0 && Number.isFinite(spanMs) && spanMs >= 1) this.byNode.set(nodeId, (bytes * 1000) / spanMs);
  }

  /** The node's last measured receive rate in bytes/s; undefined before its first measured transfer. */
  inBytesPerS(nodeId: string): number | undefined {
    return this.byNode.get(nodeId);
  }

  /** Forgets a node (lost, or gone from the region). */
  forget(nodeId: string): void {
    this.byNode.delete(nodeId);
  }
}
