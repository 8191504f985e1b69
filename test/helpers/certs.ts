/**
 * Test certificates made with `openssl` (Debian's): a CA, and certificates it signs for servers and clients, valid
 * for a day, in a directory the test owns. `hasOpenssl` lets a test skip, with its reason, where openssl is missing.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export const hasOpenssl = (() => {
  try {
    execFileSync("openssl", ["version"], { stdio: "pipe" });
    return true;
  } catch {
    return false;
  }
})();

/**
 * Why a suite that needs certificates does not run here (undefined where openssl runs). A suite that skips registers
 * a skipped test named with it (`it.skip(opensslMissing, …)`), so the run's summary says what was not run and why.
 */
export const opensslMissing: string | undefined = hasOpenssl ? undefined : "not run: `openssl` is not installed (Debian's openssl package; .ci/run installs it)";

export interface TestCa {
  /** The CA's certificate (PEM file). */
  caFile: string;
  /** A key and certificate signed by this CA for `name`, valid for `sans` (default IP:127.0.0.1, DNS:localhost). */
  issue(name: string, sans?: string): { certFile: string; keyFile: string };
}

/** A new CA named `name` in `dir` (its files are `<name>.pem` and `<name>.key`). */
export function makeTestCa(dir: string, name = "ca"): TestCa {
  const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "1", "-subj", `/CN=tidegate-test-${name}`);
  return {
    caFile: join(dir, `${name}.pem`),
    issue(who, sans = "IP:127.0.0.1,DNS:localhost") {
      writeFileSync(join(dir, `${who}.ext`), `subjectAltName=${sans}\n`);
      ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", `${who}.key`, "-out", `${who}.csr`, "-subj", `/CN=${who}`);
      ssl("x509", "-req", "-in", `${who}.csr`, "-CA", `${name}.pem`, "-CAkey", `${name}.key`, "-CAcreateserial", "-out", `${who}.pem`, "-days", "1", "-extfile", `${who}.ext`);
      return { certFile: join(dir, `${who}.pem`), keyFile: join(dir, `${who}.key`) };
    },
  };
}
