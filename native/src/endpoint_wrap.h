// Endpoint's JS class: one node's transport (TCP or verbs), its bound data port, and at most one running role at a
// time. start() runs the role on a worker thread; block arrivals and the final outcome come back through a
// thread-safe function. A per-run environment cleanup hook cancels and joins the thread if the environment (main
// thread or worker) goes away mid-transfer.
#pragma once
#include <napi.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport.h"

namespace tg {
class EndpointWrap : public Napi::ObjectWrap<EndpointWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit EndpointWrap(const Napi::CallbackInfo& info);
  ~EndpointWrap() override;
  /** Cancels a running role, joins its thread and closes the transport. Idempotent. */
  void Shutdown();

 private:
  struct Sink;
  std::unique_ptr<Transport> transport_;
  std::string fallback_;
  std::thread thread_;
  bool running_ = false;
  bool hookAdded_ = false;
  napi_env env_ = nullptr;
  Napi::ThreadSafeFunction tsfn_;
  RunSpec spec_;
  std::unique_ptr<Sink> sink_;

  static void RunHook(void* arg);
  void Finish();
  bool ParseSpec(Napi::Env env, Napi::Object o, uint32_t blockCount);
  Napi::Value Start(const Napi::CallbackInfo& info);
  Napi::Value Cancel(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value TakeRefusals(const Napi::CallbackInfo& info);
  Napi::Value Port(const Napi::CallbackInfo& info);
  Napi::Value TransportName(const Napi::CallbackInfo& info);
  Napi::Value Fallback(const Napi::CallbackInfo& info);
  Napi::Value Running(const Napi::CallbackInfo& info);
  Napi::Value Closed(const Napi::CallbackInfo& info);
};
}  // namespace tg
