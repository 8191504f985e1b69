/**
 * Runs code of this repository inside `softroce-vm` (../shared/tools/softroce-vm, or TIDEGATE_SOFTROCE_VM): a
 * throw-away QEMU VM whose kernel has a soft-RoCE device, rxe0, so the verbs transport moves real RDMA there. Used by
 * test/native/verbs-vm.test.ts (the verbs suite, in `npm test`) and bench:verbs.
 *
 * The repository (dist/, the sources vitest transforms, the addon and the node_modules the suite and the agent load)
 * goes in as one tar file with the node binary beside it; the VM unpacks it and runs the command from its root.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { probeVerbs } from "../../../native/index.js";
import { repoRoot } from "../../../core/paths.js";

/** Where the tool is: TIDEGATE_SOFTROCE_VM, else ../shared/tools/softroce-vm beside the repository. */
export function softroceTool(): string {
  return process.env.TIDEGATE_SOFTROCE_VM ?? resolve(repoRoot(), "..", "shared", "tools", "softroce-vm");
}

/** Where `cmd` is on PATH, or undefined. */
export function commandPath(cmd: string): string | undefined {
  const r = spawnSync("sh", ["-c", `command -v ${cmd}`], { encoding: "utf8" });
  return r.status === 0 && r.stdout.trim() !== "" ? r.stdout.trim() : undefined;
}
const onPath = (cmd: string) => commandPath(cmd) !== undefined;

/** Why the VM cannot run here, or undefined when it can (the tool installs QEMU and the kernel when it may). */
export function vmUnavailable(): string | undefined {
  const tool = softroceTool();
  if (!existsSync(tool)) return `softroce-vm not found at ${tool} (set TIDEGATE_SOFTROCE_VM)`;
  if (!probeVerbs().compiled) return "the addon was built without libibverbs headers (install libibverbs-dev and rebuild)";
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const kernel = existsSync("/boot") && readdirSync("/boot").some((f) => /^vmlinuz-.*-amd64$/.test(f) && !f.includes("cloud"));
  const missing = [onPath("qemu-system-x86_64") ? "" : "qemu-system-x86_64", onPath("ibv_devices") ? "" : "ibv_devices", onPath("cpio") ? "" : "cpio", kernel ? "" : "a Debian amd64 kernel in /boot"].filter((m) => m !== "");
  if (missing.length > 0 && !(root && onPath("apt-get"))) return `softroce-vm needs ${missing.join(", ")} and cannot install them (not root, or no apt-get)`;
  if (process.arch !== "x64") return `softroce-vm boots an x86-64 kernel; this is ${process.arch}`;
  return undefined;
}

// node_modules the VM does not need (type checking, API clients, browsers, Kubernetes schemas): left out to keep
// the initramfs small.
const LEFT_OUT = ["typescript", "openai", "playwright-core", "kubernetes-models", "@kubernetes-models", "@types", "node-gyp", "fast-check"];

/**
 * Shell prelude run first in the VM: every interface up (rxe0's port is DOWN while its veth peer is), jumbo frames
 * (RoCE's 4096-byte path MTU, as RDMA deployments run), the bundle unpacked; then the caller's command.
 */
function vmScript(bundle: string, command: string): string {
  return [
    "set -e",
    "for i in $(ls /sys/class/net); do ip link set $i up; done",
    "for i in $(ls /sys/class/net); do [ $i = lo ] || ip link set $i mtu 9000; done",
    "n=0; until ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE; do n=$((n+1)); [ $n -lt 50 ] || { echo 'rxe0 port never became active'; exit 1; }; sleep 0.1; done",
    `mkdir -p ${bundle}/repo && tar xf ${bundle}/repo.tar -C ${bundle}/repo && cd ${bundle}/repo`,
    "export PATH=$(dirname " + process.execPath + "):$PATH",
    "set +e",
    command,
  ].join("\n");
}

function nativeModules(root: string): string[] {
  const r = spawnSync("find", [join(root, "node_modules"), join(root, "native", "build", "Release"), "-maxdepth", "4", "-name", "*.node", "-not", "-path", "*/obj.target/*"], { encoding: "utf8" });
  return r.stdout.split("\n").filter((l) => l !== "");
}

export interface VmRun {
  code: number;
  /** Everything the VM printed after it booted. */
  output: string;
}

/**
 * Packs the repository, boots the VM and runs `command` (a shell command line) from the repository root inside it.
 * `extra` are more host files to copy in (e.g. ib_write_bw). Output is streamed to `onLine` as it comes.
 */
export async function runInVm(o: { command: string; memMiB?: number; timeoutS?: number; extra?: string[]; onLine?: (line: string) => void }): Promise<VmRun> {
  // Not under /tmp: the VM mounts a fresh tmpfs on /tmp, which would hide the copied files.
  const base = process.env.TIDEGATE_VM_WORKDIR ?? "/var/tmp";
  const dir = mkdtempSync(join(base, "tidegate-vm-"));
  try {
    const root = repoRoot();
    const tar = spawnSync(
      "tar",
      ["cf", join(dir, "repo.tar"), "--exclude=./.git", "--exclude=./native/build/Release/obj.target", "--exclude=./.data", "--exclude=./out", ...LEFT_OUT.map((m) => `--exclude=./node_modules/${m}`), "-C", root, "."],
      { encoding: "utf8" },
    );
    if (tar.status !== 0) throw new Error(`packing the repository for the VM failed: ${tar.stderr}`);
    const args = ["--mem", String(o.memMiB ?? 3072), "--timeout", String(o.timeoutS ?? 900), "--copy", process.execPath, "--copy", dir];
    // The tool copies the shared libraries of the ELF files it is given, not of those inside the tar: name every
    // native module so the libraries they link (librt, libibverbs ...) are there too.
    for (const f of nativeModules(root)) args.push("--copy", f);
    for (const e of o.extra ?? []) args.push("--copy", e);
    args.push("--", "sh", "-c", vmScript(dir, o.command));
    const child = spawn(softroceTool(), args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    let partial = "";
    const take = (chunk: Buffer) => {
      const text = partial + chunk.toString("utf8");
      const lines = text.split("\n");
      partial = lines.pop() ?? "";
      for (const l of lines) {
        output += l + "\n";
        o.onLine?.(l);
      }
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    const code = await new Promise<number>((res) => child.on("close", (c) => res(c ?? 1)));
    if (partial !== "") output += partial;
    return { code, output };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
