import { probeVerbs } from "../../native/index.js";
import { transportConformance } from "./conformance.js";

// Every transport that can run here: tcp always; verbs only where an RDMA device exists.
const verbs = probeVerbs();
transportConformance("tcp");
if (verbs.devices > 0) transportConformance("verbs");
else console.log(`transport conformance: verbs not run (${verbs.compiled ? "compiled in" : "not compiled"}; ${verbs.detail})`);
