/**
 * deploy/kubernetes, read as a cluster and the binaries would read it:
 * - every object of the base and of each overlay (rendered with `kubectl kustomize`, where kubectl exists) validates
 *   against the Kubernetes API schemas (kubernetes-models; the PodMonitor against prometheus-operator's);
 * - every tidegate container's arguments parse with that command's flags (the flags `--help` lists), `$(VAR)`s are
 *   defined, its config files are mounted from the ConfigMap/Secret keys that exist, and the merged config
 *   (tidegate.json + secrets.json) validates; a region's --region is in the config and its gRPC port and Service
 *   match regions[].grpcAddress; an agent's --region-address is a Service port of its region;
 * - ports, probes and scrape annotations agree with the ports the command listens on, probe paths are ones the
 *   processes serve, every container has probes and resource requests, every referenced Secret/ConfigMap exists,
 *   and images are `tidegate` with a pinned tag.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import * as apps from "kubernetes-models/apps/v1";
import * as core from "kubernetes-models/v1";
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { parseArgs } from "../../bin/args.js";
import type { Command } from "../../bin/command.js";
import { validateConfig, mergeOverDefault } from "../../core/config.js";
import { CLI, REPO_ROOT } from "../e2e/procs.js";

const K8S = join(REPO_ROOT, "deploy/kubernetes");
/** Paths every tidegate process serves for probes (core/probe-server.ts, router/app.ts, planner, engine-sim). */
const PROBE_PATHS = new Set(["/livez", "/readyz", "/healthz"]);

type Obj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; [k: string]: unknown };
type Container = { name: string; image: string; imagePullPolicy?: string; args?: string[]; env?: { name: string }[]; ports?: { name?: string; containerPort: number; hostPort?: number }[]; readinessProbe?: Probe; livenessProbe?: Probe; resources?: { requests?: Record<string, string> }; volumeMounts?: { name: string; mountPath: string }[] };
type Probe = { httpGet?: { path: string; port: string | number }; exec?: unknown; tcpSocket?: unknown };
type PodSpec = { containers: Container[]; volumes?: { name: string; configMap?: { name: string }; secret?: { secretName: string } }[]; hostNetwork?: boolean };

const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  global: () => import("../../bin/commands/global.js"),
  region: () => import("../../bin/commands/region.js"),
  planner: () => import("../../bin/commands/planner.js"),
  agent: () => import("../../bin/commands/agent.js"),
  "engine-sim": () => import("../../bin/commands/engine-sim.js"),
};

const MODELS: Record<string, new (o: never) => { validate(): void }> = {
  "apps/v1/Deployment": apps.Deployment as never,
  "apps/v1/StatefulSet": apps.StatefulSet as never,
  "apps/v1/DaemonSet": apps.DaemonSet as never,
  "v1/Service": core.Service as never,
  "v1/ConfigMap": core.ConfigMap as never,
  "v1/Secret": core.Secret as never,
  "v1/Namespace": core.Namespace as never,
  "monitoring.coreos.com/v1/PodMonitor": PodMonitor as never,
};

function parseYaml(text: string, where: string): Obj[] {
  return parseAllDocuments(text)
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`${where}: ${d.errors[0]!.message}`);
      return d.toJSON() as Obj | null;
    })
    .filter((o): o is Obj => o !== null);
}

/** A kustomization's own resources (files only), read without kubectl, with its `images` applied. */
function kustomizationObjects(dir: string): Obj[] {
  const k = parseYaml(readFileSync(join(K8S, dir, "kustomization.yaml"), "utf8"), `${dir}/kustomization.yaml`)[0] as unknown as { resources: string[]; images?: { name: string; newName?: string; newTag?: string }[] };
  const objs = k.resources.flatMap((f) => parseYaml(readFileSync(join(K8S, dir, f), "utf8"), `${dir}/${f}`));
  for (const o of objs) {
    for (const c of podSpecOf(o)?.containers ?? []) {
      const img = k.images?.find((i) => i.name === c.image);
      if (img !== undefined) c.image = `${img.newName ?? img.name}${img.newTag === undefined ? "" : `:${img.newTag}`}`;
    }
  }
  return objs;
}

/** The base and the node agents (what agents mode runs), read without kubectl. */
function baseObjects(): Obj[] {
  return [...kustomizationObjects("base"), ...kustomizationObjects("agents")];
}

const kubectl = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
const haveKubectl = kubectl.status === 0;
const overlays = readdirSync(join(K8S, "overlays"));

function render(dir: string): Obj[] {
  const r = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8", maxBuffer: 16 << 20 });
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir}: ${r.stderr}`);
  return parseYaml(r.stdout, dir);
}

const commandFlags = new Map<string, Set<string>>();
/** The flags `tidegate <cmd> --help` lists. */
function helpFlags(cmd: string): Set<string> {
  let f = commandFlags.get(cmd);
  if (f === undefined) {
    const r = spawnSync(process.execPath, [CLI, cmd, "--help"], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    f = new Set([...r.stdout.matchAll(/^ {2}--([a-z0-9-]+)/gm)].map((m) => m[1]!));
    commandFlags.set(cmd, f);
  }
  return f;
}

function podSpecOf(o: Obj): PodSpec | undefined {
  const spec = o.spec as { template?: { spec: PodSpec; metadata?: { annotations?: Record<string, string> } } } | undefined;
  return spec?.template?.spec;
}

/** Everything a rendering must satisfy (see the file comment). */
async function checkRendering(objs: Obj[], where: string): Promise<void> {
  for (const o of objs) {
    const model = MODELS[`${o.apiVersion}/${o.kind}`];
    expect(model, `${where}: no schema for ${o.apiVersion} ${o.kind}`).toBeDefined();
    expect(() => new model!(o as never).validate(), `${where}: ${o.kind}/${o.metadata.name}`).not.toThrow();
  }
  const byKind = (kind: string) => objs.filter((o) => o.kind === kind);
  const configMaps = new Map(byKind("ConfigMap").map((c) => [c.metadata.name, (c as unknown as { data: Record<string, string> }).data]));
  const secrets = new Map(byKind("Secret").map((s) => [s.metadata.name, (s as unknown as { stringData?: Record<string, string>; data?: Record<string, string> })]));
  const secretKeys = (name: string) => Object.keys({ ...secrets.get(name)?.stringData, ...secrets.get(name)?.data });
  const services = byKind("Service").map((s) => s as unknown as { metadata: { name: string }; spec: { selector: Record<string, string>; ports: { port: number; targetPort: string | number }[]; publishNotReadyAddresses?: boolean } });
  const workloads = objs.filter((o) => podSpecOf(o) !== undefined);
  const tlsOf: { cmd: string; tls: boolean; serverName: string | undefined }[] = [];
  // Prefill/decode: each engine-sim's --role, and each role the regions' config gives an engine URL.
  const engineRoles: { role: string; labels: Record<string, string> }[] = [];
  const regionRoles: { at: string; url: string; role: string }[] = [];
  expect(workloads.length).toBeGreaterThan(0);

  for (const w of workloads) {
    const pod = podSpecOf(w)!;
    const annotations = (w.spec as { template: { metadata?: { annotations?: Record<string, string>; labels?: Record<string, string> } } }).template.metadata?.annotations ?? {};
    const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
    for (const v of pod.volumes ?? []) {
      if (v.configMap) expect(configMaps.has(v.configMap.name), `${where}: ConfigMap ${v.configMap.name}`).toBe(true);
      if (v.secret) expect(secrets.has(v.secret.secretName), `${where}: Secret ${v.secret.secretName}`).toBe(true);
    }
    for (const c of pod.containers) {
      const at = `${where}: ${w.kind}/${w.metadata.name}/${c.name}`;
      expect(c.readinessProbe, `${at} readinessProbe`).toBeDefined();
      expect(c.livenessProbe, `${at} livenessProbe`).toBeDefined();
      expect(c.resources?.requests?.cpu, `${at} cpu request`).toBeDefined();
      expect(c.resources?.requests?.memory, `${at} memory request`).toBeDefined();
      const ports = new Map((c.ports ?? []).map((p) => [p.name, p.containerPort]));
      for (const p of [c.readinessProbe, c.livenessProbe]) {
        if (p?.httpGet === undefined) continue;
        expect(PROBE_PATHS.has(p.httpGet.path), `${at} probe path ${p.httpGet.path}`).toBe(true);
        expect(typeof p.httpGet.port === "string" ? ports.has(p.httpGet.port) : [...ports.values()].includes(p.httpGet.port), `${at} probe port ${p.httpGet.port}`).toBe(true);
      }
      if (pod.hostNetwork === true) for (const p of c.ports ?? []) expect(p.hostPort, `${at} hostPort of ${p.name}`).toBe(p.containerPort);
      if (!/(^|\/)tidegate(:|$)/.test(c.image)) continue;

      // The image: tidegate with a pinned tag, not re-pulled on every start.
      expect(c.image, at).toMatch(/tidegate:[A-Za-z0-9._-]+$/);
      expect(c.image, at).not.toMatch(/:latest$/);
      expect(c.imagePullPolicy, at).toBe("IfNotPresent");

      // The arguments parse with the command's flags, as --help lists them.
      const [cmd, ...rest] = c.args ?? [];
      expect(cmd, at).toBeDefined();
      const known = helpFlags(cmd!);
      const load = COMMANDS[cmd!];
      expect(load, `${at}: ${cmd} is not a long-running tidegate command`).toBeDefined();
      const { command } = await load!();
      const env = new Set((c.env ?? []).map((e) => e.name));
      for (const a of rest) for (const m of a.matchAll(/\$\(([A-Z_]+)\)/g)) expect(env.has(m[1]!), `${at}: $(${m[1]}) is not in env`).toBe(true);
      for (const a of rest) if (a.startsWith("--")) expect(known.has(a.slice(2).split("=")[0]!), `${at}: ${a} is not a flag of tidegate ${cmd} (--help)`).toBe(true);
      const { flags } = parseArgs(rest, command.flags);
      tlsOf.push({ cmd: cmd!, tls: typeof flags["tls-ca"] === "string", serverName: flags["tls-server-name"] as string | undefined });
      const num = (name: string) => flags[name] as number | undefined;

      // Config files: mounted from keys that exist; the merged config validates.
      let config: ReturnType<typeof validateConfig>["config"];
      if (typeof flags.config === "string") {
        let doc: unknown;
        for (const file of flags.config.split(",")) {
          const mount = (c.volumeMounts ?? []).find((m) => file.startsWith(m.mountPath + "/"));
          expect(mount, `${at}: ${file} is not on a mounted volume`).toBeDefined();
          const key = file.slice(mount!.mountPath.length + 1);
          const vol = volumes.get(mount!.name)!;
          const text = vol.configMap ? configMaps.get(vol.configMap.name)?.[key] : (secrets.get(vol.secret!.secretName)?.stringData ?? {})[key];
          expect(text, `${at}: ${file} (${key}) is not in its ConfigMap/Secret`).toBeDefined();
          doc = mergeOverDefault(JSON.parse(text!), doc);
        }
        const r = validateConfig(doc);
        expect(r.errors.map((e) => e.message), `${at}: config`).toEqual([]);
        config = r.config;
      }
      // TLS files come from a mounted Secret's keys.
      for (const f of ["tls-ca", "tls-cert", "tls-key"]) {
        const file = flags[f];
        if (typeof file !== "string") continue;
        const mount = (c.volumeMounts ?? []).find((m) => file.startsWith(m.mountPath + "/"))!;
        expect(mount, `${at}: --${f} ${file}`).toBeDefined();
        expect(secretKeys(volumes.get(mount.name)!.secret!.secretName)).toContain(file.slice(mount.mountPath.length + 1));
      }

      // Ports: what the command listens on is what the container declares, probes and scrapes.
      const declared = [...ports.values()];
      // engine-sim serves /metrics beside its OpenAI routes, on --port.
      const metricsPort = cmd === "global" || cmd === "planner" || cmd === "engine-sim" ? num("port") : num("metrics-port");
      expect(metricsPort, `${at}: metrics port flag`).toBeDefined();
      expect(declared, `${at}: metrics port`).toContain(metricsPort);
      expect(Number(annotations["prometheus.io/port"]), `${at}: scrape annotation`).toBe(metricsPort);
      expect(annotations["prometheus.io/path"]).toBe("/metrics");
      for (const f of ["grpc-port", "data-port"]) if (num(f) !== undefined) expect(declared, `${at}: --${f}`).toContain(num(f));
      if (cmd === "global") expect(flags.host ?? config!.router.host).toBe("0.0.0.0");
      if (cmd === "region") {
        expect(flags["grpc-host"]).toBe("0.0.0.0");
        expect(flags["metrics-host"]).toBe("0.0.0.0");
        const region = config!.regions.find((r) => r.name === flags.region);
        expect(region, `${at}: --region ${String(flags.region)}`).toBeDefined();
        const [host, port] = region!.grpcAddress.split(":");
        expect(Number(port), `${at}: --grpc-port vs ${region!.grpcAddress}`).toBe(num("grpc-port"));
        const svc = services.find((s) => s.metadata.name === host);
        expect(svc, `${at}: no Service ${host}`).toBeDefined();
        expect(svc!.spec.ports.map((p) => p.port)).toContain(Number(port));
        // Readiness needs the global tier and agents to reach it first.
        expect(svc!.spec.publishNotReadyAddresses).toBe(true);
        const labels = (w.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
        expect(Object.entries(svc!.spec.selector).every(([k, v]) => labels[k] === v), `${at}: Service ${host} selects it`).toBe(true);
      }
      if (cmd === "engine-sim" && typeof flags.role === "string") engineRoles.push({ role: flags.role, labels: (w.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels });
      if (cmd === "region") for (const [url, role] of Object.entries(config!.engines.roles)) regionRoles.push({ at, url, role });
      if (cmd === "agent") {
        const [host, port] = String(flags["region-address"]).split(":");
        const svc = services.find((s) => s.metadata.name === host);
        expect(svc, `${at}: --region-address ${String(flags["region-address"])}`).toBeDefined();
        expect(svc!.spec.ports.map((p) => p.port)).toContain(Number(port));
        expect(pod.hostNetwork).toBe(true);
      }
    }
  }
  // A role in engines.roles names a Service of this rendering whose pods run engine-sim with that --role.
  for (const r of regionRoles) {
    const u = new URL(r.url);
    const svc = services.find((s) => s.metadata.name === u.hostname);
    if (svc === undefined) continue; // an engine outside the rendering (vLLM's own Services)
    expect(svc.spec.ports.map((p) => p.port), `${r.at}: ${r.url}`).toContain(Number(u.port));
    const behind = engineRoles.filter((e) => Object.entries(svc.spec.selector).every(([k, v]) => e.labels[k] === v));
    expect(behind.map((e) => e.role), `${r.at}: ${r.url} is ${r.role}`).toEqual([r.role]);
  }
  // gRPC TLS is all or nothing: regions that require client certificates need every client to have one, and the
  // name regions expect in agents' certificates is the one agents (and their engines) present.
  const regionsTls = tlsOf.filter((t) => t.cmd === "region").map((t) => t.tls);
  if (regionsTls.some((x) => x)) {
    expect(tlsOf.filter((t) => t.cmd !== "region").map((t) => `${t.cmd}:${t.tls}`), `${where}: TLS on every tier`).toEqual(tlsOf.filter((t) => t.cmd !== "region").map((t) => `${t.cmd}:true`));
    expect(regionsTls.every((x) => x), `${where}: TLS on every region`).toBe(true);
    const agents = tlsOf.filter((t) => t.cmd === "agent");
    if (agents.length > 0) for (const t of [...agents, ...tlsOf.filter((x) => x.cmd === "region")]) expect(t.serverName, `${where}: ${t.cmd} --tls-server-name`).toBe(agents[0]!.serverName);
  } else expect(tlsOf.filter((t) => t.tls).map((t) => t.cmd), `${where}: TLS without TLS regions`).toEqual([]);

  // Every Service's named targetPort exists on the pods it selects.
  for (const s of services) {
    const pods = workloads.filter((w) => {
      const labels = (w.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
      return Object.entries(s.spec.selector).every(([k, v]) => labels[k] === v);
    });
    expect(pods.length, `${where}: Service ${s.metadata.name} selects nothing`).toBeGreaterThan(0);
    for (const p of s.spec.ports) {
      if (typeof p.targetPort !== "string") continue;
      for (const w of pods) expect(podSpecOf(w)!.containers.some((c) => (c.ports ?? []).some((cp) => cp.name === p.targetPort)), `${where}: ${s.metadata.name} → ${p.targetPort}`).toBe(true);
    }
  }
}

describe("deploy/kubernetes", () => {
  it("base and agents: every manifest validates against the Kubernetes schemas and matches what the binaries accept", async () => {
    const objs = baseObjects();
    expect(objs.map((o) => o.kind).sort()).toEqual(expect.arrayContaining(["ConfigMap", "DaemonSet", "Deployment", "Secret", "Service", "StatefulSet"]));
    await checkRendering(objs, "base");
  });

  for (const overlay of overlays) {
    it.skipIf(!haveKubectl)(`overlay ${overlay}: rendered by kubectl kustomize, validates and matches the binaries${haveKubectl ? "" : " (skipped: kubectl is not installed; .ci/run installs kubernetes-client)"}`, async () => {
      const objs = render(join(K8S, "overlays", overlay));
      const namespaces = new Set(objs.filter((o) => o.kind !== "Namespace").map((o) => o.metadata.namespace));
      expect(namespaces.size, `${overlay}: one namespace`).toBe(1);
      expect(objs.some((o) => o.kind === "Namespace" && namespaces.has(o.metadata.name))).toBe(true);
      await checkRendering(objs, overlay);
    });
  }

  it("catches a flag the binary does not take (the check can fail)", async () => {
    const objs = baseObjects();
    const dep = objs.find((o) => o.kind === "Deployment" && o.metadata.name === "tidegate-planner")!;
    podSpecOf(dep)!.containers[0]!.args!.push("--metrics-port", "1");
    await expect(checkRendering(objs, "broken")).rejects.toThrow(/--metrics-port is not a flag of tidegate planner/);
  });
});
