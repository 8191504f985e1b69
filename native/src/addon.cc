// The N-API surface of the data plane: BlockStore, Endpoint (one node's transport + running role), the error class
// hand-off (init), and the verbs probe. Built with NAPI_DISABLE_CPP_EXCEPTIONS: every argument is checked here and a
// TypeError thrown on misuse; failures are instances of the JS DataPlaneError class given to init().
#include <napi.h>

#include "checksum.h"
#include "endpoint_wrap.h"
#include "measure.h"
#include "napi_util.h"
#include "store_wrap.h"
#include "transport.h"

namespace tg {
Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* d = new AddonData();
  env.SetInstanceData<AddonData>(d);
  // Frees every live store's memory and stops every endpoint when this environment (main or worker) goes away.
  env.AddCleanupHook([d]() {
    for (StoreWrap* s : d->stores) s->Release();
    for (EndpointWrap* e : d->endpoints) e->Shutdown();
  });
  exports.Set("BlockStore", StoreWrap::Define(env));
  exports.Set("Endpoint", EndpointWrap::Define(env));
  exports.Set("init", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                if (info.Length() != 1 || !info[0].IsFunction()) return throwType(info.Env(), "init(DataPlaneError) needs the error class");
                data(info.Env())->errorCtor = Napi::Persistent(info[0].As<Napi::Function>());
                return info.Env().Undefined();
              }));
  exports.Set("probeVerbs", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                VerbsProbe p = probeVerbs();
                Napi::Object o = Napi::Object::New(info.Env());
                o.Set("compiled", p.compiled);
                o.Set("devices", p.devices);
                o.Set("detail", p.detail);
                return o;
              }));
  exports.Set("checksum", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                if (info.Length() != 1 || !info[0].IsBuffer()) return throwType(info.Env(), "checksum(buffer) needs a Buffer");
                auto buf = info[0].As<Napi::Buffer<uint8_t>>();
                return Napi::Number::New(info.Env(), blockChecksum(buf.Data(), buf.Length()));
              }));
  exports.Set("crc32c", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                if (info.Length() != 1 || !info[0].IsBuffer()) return throwType(info.Env(), "crc32c(buffer) needs a Buffer");
                auto buf = info[0].As<Napi::Buffer<uint8_t>>();
                return Napi::Number::New(info.Env(), crc32c(0, buf.Data(), buf.Length()));
              }));
  exports.Set("checksumHardware", Napi::Boolean::New(env, checksumHardware()));
  Napi::Object callBytes = Napi::Object::New(env);
  callBytes.Set("send", static_cast<double>(tcpCallBytes().send));
  callBytes.Set("recv", static_cast<double>(tcpCallBytes().recv));
  exports.Set("tcpCallBytes", callBytes);
  // measureCosts(bytes, blockBytes, chunkBytes): blocking microbenchmarks (measure.h) for bench:dataplane.
  exports.Set("measureCosts", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
                Napi::Env env = info.Env();
                if (info.Length() != 3) return throwType(env, "measureCosts(bytes, blockBytes, chunkBytes) takes 3 arguments");
                uint64_t bytes, blockBytes, chunk;
                if (!readUint(env, info[0], "bytes", 1ull << 40, bytes) || !readUint(env, info[1], "blockBytes", 1ull << 40, blockBytes) ||
                    !readUint(env, info[2], "chunkBytes", 1ull << 40, chunk))
                  return env.Undefined();
                if (bytes < 8 || blockBytes < 8 || chunk == 0) return throwType(env, "measureCosts: bytes and blockBytes must be at least 8, chunkBytes at least 1");
                CostMeasure m;
                try {
                  m = measureCosts(bytes, blockBytes, chunk);
                } catch (const std::bad_alloc&) {
                  return throwError(env, "over_memory", "cannot map 2 × " + std::to_string(bytes) + " bytes to measure");
                }
                Napi::Object o = Napi::Object::New(env);
                o.Set("memcpyBytesPerS", m.memcpyBytesPerS);
                o.Set("checksumBytesPerS", m.checksumBytesPerS);
                o.Set("arrivalChecksumBytesPerS", m.arrivalChecksumBytesPerS);
                o.Set("copyThenChecksumBytesPerS", m.copyThenChecksumBytesPerS);
                return o;
              }));
  return exports;
}
}  // namespace tg

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return tg::Init(env, exports); }
NODE_API_MODULE(tidegate_dataplane, InitModule)
