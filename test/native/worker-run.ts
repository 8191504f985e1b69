/** Worker-thread body for boundary.test.ts: starts a loopback transfer of workerData.bytes and reports "started". */
import { parentPort, workerData } from "node:worker_threads";
import { BlockStore, Endpoint } from "../../native/index.js";

const bytes = (workerData as { bytes: number }).bytes;
const src = BlockStore.forModel(bytes, 64);
src.fillPattern(1);
const dst = BlockStore.forModel(bytes, 64);
const a = Endpoint.open({ host: "127.0.0.1" });
const b = Endpoint.open({ host: "127.0.0.1" });
const peers = [
  { id: "a", host: "127.0.0.1", port: a.port },
  { id: "b", host: "127.0.0.1", port: b.port },
];
const blocks = [...Array(64).keys()];
void a.run({ runId: 1, self: 0, peers, sends: blocks.map((block) => ({ peer: 1, block })), expect: [[], []] }, src).catch(() => undefined);
void b.run({ runId: 1, self: 1, peers, sends: [], expect: [blocks, []] }, dst, { onBlock: (x) => x.block === 0 && parentPort!.postMessage("started") }).catch(() => undefined);
