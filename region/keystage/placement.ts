/**
 * Where a new replica of a stage goes (QUART §6.2, dispersed placement). A server is (free GPUs, key-stage replicas
 * it already runs, stages in its host cache).
 *  - Plentiful capacity (some server has at least `plentifulFreeGpus` free): a key stage goes to the server with the
 *    most free GPUs among those whose host cache holds the stage (QUART's cache-aware scheduler, §4.3 and §6.2: "copies
 *    can be efficiently transferred from server memory to new GPUs, with less time spent on loading from disk"), or
 *    among all open servers when none of them caches it, so the servers holding key stages keep idle GPUs to grow
 *    into; other stages pack densely (the server with the fewest free GPUs that still has one).
 *  - Contention: key stages are dispersed by minimising the KL divergence (Eq. 8) between their distribution over
 *    servers, P, and the uniform distribution Q over the servers that can take one. `disperse` runs the gradient
 *    descent of Eq. 9–10 on P; the replica goes to the server whose share of key replicas is furthest below the
 *    descended P (the largest deficit), i.e. the placement that lowers D_KL(P‖Q) the most.
 * Ties go to a server whose host cache holds the stage (a fast start, §6.1), then to the lower index.
 */

/** What placement sees of one server. */
export interface ServerView {
  freeGpus: number;
  /** Key-stage replicas (of any stage of this pipeline) the server runs now. */
  keyReplicas: number;
  /** True when the server's host cache holds the stage being placed. */
  cached: boolean;
}

/** D_KL(P‖Q) = Σ_j P_j·log(P_j / Q_j) (Eq. 8) over one row; terms with P_j = 0 count 0. Natural log. */
export function klDivergence(p: readonly number[], q: readonly number[]): number {
  let d = 0;
  for (let j = 0; j < p.length; j++) {
    const pj = p[j]!;
    if (pj > 0) d += pj * Math.log(pj / q[j]!);
  }
  return d;
}

/**
 * Gradient descent of Eq. 9–10 on one row P toward Q: P_j ← P_j − α·(∂D/∂P_j − mean over open j), the gradient
 * 1 + log(P_j/Q_j) of Eq. 9 projected onto the probability simplex (then clamped ≥ ε and renormalised), for `iterations` steps or until D_KL < `tolerance`. Entries
 * with Q_j = 0 (servers that cannot take a replica) are held at 0.
 */
export function disperse(p0: readonly number[], q: readonly number[], alpha = 0.1, iterations = 200, tolerance = 1e-6): number[] {
  const eps = 1e-9;
  let p = p0.map((v, j) => (q[j]! > 0 ? Math.max(v, eps) : 0));
  const norm = (v: number[]) => {
    const s = v.reduce((a, b) => a + b, 0);
    return v.map((x) => x / s);
  };
  p = norm(p);
  const open = q.filter((v) => v > 0).length;
  for (let it = 0; it < iterations && klDivergence(p, q) > tolerance; it++) {
    // Eq. 9's gradient, projected onto the simplex (its mean over open servers removed, so Σ P stays 1): the
    // fixed point is log(P/Q) constant, i.e. P = Q.
    const g = p.map((pj, j) => (q[j]! > 0 ? 1 + Math.log(pj / q[j]!) : 0));
    const mean = g.reduce((a, b) => a + b, 0) / open;
    p = norm(p.map((pj, j) => (q[j]! > 0 ? Math.max(eps, pj - alpha * (g[j]! - mean)) : 0)));
  }
  return p;
}

/** What is being placed and when capacity counts as plentiful. */
export interface PlaceOptions {
  /** Is the stage being placed a key stage? */
  key: boolean;
  /** A server with at least this many free GPUs means capacity is plentiful. */
  plentifulFreeGpus: number;
}

/** Index of the server a new replica goes to, or -1 when no server has a free GPU. */
export function placeReplica(servers: readonly ServerView[], opts: PlaceOptions): number {
  const open = servers.map((s, j) => (s.freeGpus > 0 ? j : -1)).filter((j) => j >= 0);
  if (open.length === 0) return -1;
  const better = (score: (j: number) => number, among = open) =>
    among.reduce((best, j) => {
      const d = score(j) - score(best);
      if (d > 1e-12) return j;
      if (d < -1e-12) return best;
      return servers[j]!.cached && !servers[best]!.cached ? j : best;
    });
  const mostFree = Math.max(...open.map((j) => servers[j]!.freeGpus));
  if (!opts.key) return better((j) => -servers[j]!.freeGpus); // pack densely
  if (mostFree >= opts.plentifulFreeGpus) {
    const cached = open.filter((j) => servers[j]!.cached);
    return better((j) => servers[j]!.freeGpus, cached.length > 0 ? cached : open);
  }
  // Contention: disperse key replicas (Eq. 8–10). P counts the key replicas already placed (+ the new one spread
  // evenly, so an empty cluster still has a distribution); Q is uniform over the open servers.
  const total = servers.reduce((s, v) => s + v.keyReplicas, 0) + 1;
  const p = servers.map((s) => (s.keyReplicas + 1 / servers.length) / (total));
  const q = servers.map((s) => (s.freeGpus > 0 ? 1 / open.length : 0));
  const target = disperse(p, q);
  return better((j) => target[j]! - servers[j]!.keyReplicas / total);
}
