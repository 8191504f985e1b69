/** The embedded default `tidegate dev` runs on: 3 regions, 4 models, simulated engines in real time, embedded queue. */
import { DEFAULT_MODELS } from "./models-section.js";

function defaultRegion(name: string, utcOffsetH: number, proximity: string[], port: number): unknown {
  return {
    name,
    utcOffsetH,
    proximity,
    grpcAddress: `127.0.0.1:${port}`,
    gpus: [{ type: "h100-80gb", count: 64 }],
    endpoints: DEFAULT_MODELS.map((m) => ({ model: m.name, gpu: "h100-80gb", instances: 2, minInstances: 1, maxInstances: 8 })),
  };
}

/** The embedded default: 3 regions, 4 models, simulated engines in real time, embedded queue. */
export const DEFAULT_CONFIG_JSON: unknown = {
  models: DEFAULT_MODELS,
  regions: [
    defaultRegion("us-east", -5, ["us-central", "us-west"], 50051),
    defaultRegion("us-central", -6, ["us-east", "us-west"], 50052),
    defaultRegion("us-west", -8, ["us-central", "us-east"], 50053),
  ],
};
