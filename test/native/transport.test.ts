import { it } from "vitest";
import { probeVerbs } from "../../native/index.js";
import { transportConformance } from "./conformance.js";

// Every transport that can run here: tcp always; verbs where an RDMA device exists. Without one, the verbs run of
// this suite happens inside softroce-vm (test/native/verbs-vm.test.ts).
const verbs = probeVerbs();
transportConformance("tcp");
if (verbs.devices > 0) transportConformance("verbs");
else it.skip(`transport conformance: verbs (skipped here: ${verbs.compiled ? "compiled in" : "not compiled"}; ${verbs.detail}; test/native/verbs-vm.test.ts runs it on soft-RoCE inside a VM)`, () => undefined);
