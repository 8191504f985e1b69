/**
 * Emulated hosts for multi-host tests and the data plane bench: one network namespace per node, each joined to a
 * private bridge by a veth pair, every link shaped with `tc ... tbf` in both directions (this kernel has no netem).
 * Names carry a random tag so parallel runs never collide; destroy() removes everything and is safe to call twice.
 * Each namespace sets net.ipv4.tcp_slow_start_after_idle=0 (connections that idle between multicast steps keep
 * their congestion window, as on a tuned cluster).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";

/** One emulated host: namespace, address on the bridge, shaped rate. */
export interface NetnsNode {
  name: string;
  /** The namespace name (for `ip netns exec`). */
  ns: string;
  ip: string;
  rateMbit: number;
}

/** Namespaces on one bridge; destroy() removes them all. */
export interface Topology {
  tag: string;
  mtu: number;
  bridge: string;
  /** The root namespace's address on the bridge (where the test process is reached). */
  hostIp: string;
  nodes: NetnsNode[];
  /** Re-shapes one node's link (both directions). */
  shape(node: NetnsNode, rateMbit: number): void;
  destroy(): void;
}

function ip(args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** Why namespaces cannot be used here, or undefined when they can (root, iproute2, netns support). */
export function netnsUnavailable(): string | undefined {
  if (typeof process.getuid === "function" && process.getuid() !== 0) return "not running as root";
  const probe = `tgprobe${randomBytes(3).toString("hex")}`;
  const add = spawnSync("ip", ["netns", "add", probe], { encoding: "utf8" });
  if (add.status !== 0) return `ip netns add failed: ${(add.stderr || String(add.error)).trim()}`;
  spawnSync("ip", ["netns", "del", probe]);
  return undefined;
}

function tbf(dev: string, rateMbit: number, ns?: string): void {
  // burst ≥ rate × 1 ms keeps tbf from throttling below its rate; latency bounds the queue (and heartbeat delay).
  const burstKb = Math.max(64, Math.ceil((rateMbit * 1000) / 8 / 1000) * 2);
  const cmd = ["tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", `${rateMbit}mbit`, "burst", `${burstKb}kb`, "latency", "10ms"];
  execFileSync(ns === undefined ? cmd[0]! : "ip", ns === undefined ? cmd.slice(1) : ["netns", "exec", ns, ...cmd], { stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * Creates `rates.length` namespaces on one bridge; node i's link runs at rates[i] Mbit/s each way. `mtu` sets the
 * MTU of the bridge and every veth (1500 by default; 9000 = jumbo frames, as datacenter fabrics use).
 */
export function createTopology(rates: number[], mtu = 1500): Topology {
  const tag = randomBytes(3).toString("hex");
  const subnet = `10.${200 + (parseInt(tag.slice(0, 2), 16) % 50)}.${parseInt(tag.slice(2, 4), 16)}`;
  const bridge = `tgbr${tag}`;
  const nodes: NetnsNode[] = [];
  const created: { ns: string[]; bridge: boolean } = { ns: [], bridge: false };
  const destroy = () => {
    for (const ns of created.ns.splice(0)) spawnSync("ip", ["netns", "del", ns]);
    if (created.bridge) spawnSync("ip", ["link", "del", bridge]);
    created.bridge = false;
  };
  try {
    ip(["link", "add", bridge, "type", "bridge"]);
    created.bridge = true;
    ip(["link", "set", bridge, "mtu", String(mtu)]);
    ip(["addr", "add", `${subnet}.254/24`, "dev", bridge]);
    ip(["link", "set", bridge, "up"]);
    rates.forEach((rateMbit, i) => {
      const ns = `tg${tag}n${i}`;
      const host = `tgv${tag}${i}a`;
      const peer = `tgv${tag}${i}b`;
      ip(["netns", "add", ns]);
      created.ns.push(ns);
      ip(["link", "add", host, "type", "veth", "peer", "name", peer]);
      ip(["link", "set", peer, "netns", ns]);
      ip(["link", "set", host, "mtu", String(mtu)]);
      ip(["netns", "exec", ns, "ip", "link", "set", peer, "mtu", String(mtu)]);
      ip(["link", "set", host, "master", bridge, "up"]);
      ip(["netns", "exec", ns, "ip", "addr", "add", `${subnet}.${i + 1}/24`, "dev", peer]);
      ip(["netns", "exec", ns, "ip", "link", "set", peer, "up"]);
      ip(["netns", "exec", ns, "ip", "link", "set", "lo", "up"]);
      // multicast connections idle between binomial steps; keep their congestion window (a per-namespace setting)
      execFileSync("ip", ["netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0"], { stdio: ["ignore", "ignore", "pipe"] });
      const node = { name: `n${i}`, ns, ip: `${subnet}.${i + 1}`, rateMbit };
      nodes.push(node);
      tbf(peer, rateMbit, ns);
      tbf(host, rateMbit);
    });
  } catch (err) {
    destroy();
    throw err;
  }
  return {
    tag,
    mtu,
    bridge,
    hostIp: `${subnet}.254`,
    nodes,
    shape(node, rateMbit) {
      const i = nodes.indexOf(node);
      tbf(`tgv${tag}${i}b`, rateMbit, node.ns);
      tbf(`tgv${tag}${i}a`, rateMbit);
      node.rateMbit = rateMbit;
    },
    destroy,
  };
}
