// Builds the native data plane: the N-API addon (node-gyp, against the Node headers in /usr) and the plain C
// TCP sender/receiver pair the data plane bench measures as its raw-TCP limit. Run by `npm run build:native`
// (and so by `npm install` through `prepare`). The verbs transport is compiled only when libibverbs headers exist.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

function run(cmd, args, cwd) {
  process.stderr.write(`native/build.mjs: ${cmd} ${args.join(" ")}\n`);
  const r = spawnSync(cmd, args, { cwd, stdio: "inherit" });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    process.stderr.write(`native/build.mjs: ${cmd} exited with ${r.status}\n`);
    process.exit(r.status ?? 1);
  }
}

const verbs = existsSync("/usr/include/infiniband/verbs.h");
process.stderr.write(`native/build.mjs: libibverbs headers ${verbs ? "found: verbs transport compiled" : "absent: verbs transport excluded"}\n`);
const nodedir = existsSync("/usr/include/node/node_api.h") ? ["--nodedir=/usr"] : [];
run(process.execPath, [require.resolve("node-gyp/bin/node-gyp.js"), "rebuild", ...nodedir, "--jobs=2"], here);
mkdirSync(join(here, "build"), { recursive: true });
run(process.env.CC ?? "cc", ["-O2", "-Wall", "-o", join(here, "build", "tcp_pair"), join(here, "bench", "tcp_pair.c")], here);
