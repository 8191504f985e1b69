import { describe, expect, it } from "vitest";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync, gzipSync } from "node:zlib";
import { shippedDataDir } from "../../core/paths.js";
import { SHARED_DATA, needingSharedData, sharedDataMissing } from "../../test/helpers/shared-data.js";
import { DEFAULT_WORKLOAD_JSON } from "./spec.js";
import { PACKED_EXTENSION, loadServeGen, packClients, parseClientCsv, parsePackedClients } from "./servegen.js";

/** Two clients of three windows: client 3 all zero, client 7 with a Gamma window, a Weibull one clamped, an empty one. */
const CLIENT_3 = "0,0,0,,0,0\n600,0,0,,0,0\n1200,0,0,,0,0\n";
const CLIENT_7 = "0,0.5,1.2,Gamma,0.25,2\n600,0,0,,0,0\n1200,1.75,3,Weibull,0.01,0.3\n";

describe("ServeGen's per-client series, packed", () => {
  const clients = [parseClientCsv("language/m-x/chunk-3", CLIENT_3), parseClientCsv("language/m-x/chunk-7", CLIENT_7)];

  it("keeps every client, the window count and each non-empty window, and reads back the same series", () => {
    const text = packClients("language/m-x", clients);
    expect(text.split("\n").slice(1)).toEqual(["# windows 3", "# clients 3 7", "client,window,rate_rps,arrival_dist,shape", "7,0,0.5,Gamma,0.25", "7,2,1.75,Weibull,0.05", ""]);
    expect(parsePackedClients("language/m-x", text)).toEqual(clients);
  });

  it("loads the packed file where the per-client folder is missing, the folder where both exist", () => {
    const root = mkdtempSync(join(tmpdir(), "tidegate-servegen-"));
    try {
      mkdirSync(join(root, "language"));
      writeFileSync(join(root, `language/m-x${PACKED_EXTENSION}`), gzipSync(packClients("language/m-x", clients)));
      expect(loadServeGen(root, "language/m-x")).toEqual(clients);
      mkdirSync(join(root, "language/m-x"));
      writeFileSync(join(root, "language/m-x/chunk-1-trace.csv"), CLIENT_7);
      expect(loadServeGen(root, "language/m-x").map((c) => c.id)).toEqual(["language/m-x/chunk-1"]);
      expect(() => loadServeGen(root, "language/m-y")).toThrow(/no ServeGen per-client series at .*m-y, nor their packed form .*m-y\.csv\.gz/);
      writeFileSync(join(root, `language/m-z${PACKED_EXTENSION}`), "not gzip");
      expect(() => loadServeGen(root, "language/m-z")).toThrow(/source language\/m-z: cannot read the packed series .*m-z\.csv\.gz/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("refuses a damaged packed file with the line", () => {
    const text = packClients("language/m-x", clients);
    expect(() => parsePackedClients("s", text.replace("# windows 3", "# windows x"))).toThrow(/packed s line 2/);
    expect(() => parsePackedClients("s", text.replace("7,0,0.5", "9,0,0.5"))).toThrow(/packed s line 5: .*a client of the header/);
    expect(() => parsePackedClients("s", text.replace("7,2,1.75", "7,3,1.75"))).toThrow(/packed s line 6: window must be an integer in \[0, 3\)/);
    expect(() => parsePackedClients("s", text.replace("Weibull", "Normal"))).toThrow(/arrival_dist/);
  });

  const sources = [...new Set(DEFAULT_WORKLOAD_JSON.models.map((m) => m.source))];
  it.skipIf(sharedDataMissing !== undefined)(needingSharedData("the shipped packed sources are exactly the full data folder's per-client files"), () => {
    for (const s of sources) {
      const full = loadServeGen(join(SHARED_DATA, "servegen/data"), s);
      const shipped = gunzipSync(readFileSync(join(shippedDataDir(), "servegen/data", `${s}${PACKED_EXTENSION}`))).toString("utf8");
      expect(shipped).toBe(packClients(s, full));
      expect(loadServeGen(join(shippedDataDir(), "servegen/data"), s)).toEqual(full);
    }
  });

  it("ships every source the default week reads", () => {
    for (const s of sources) expect(existsSync(join(shippedDataDir(), "servegen/data", `${s}${PACKED_EXTENSION}`))).toBe(true);
  });
});
