#include "endpoint_wrap.h"

#include "napi_util.h"
#include "store_wrap.h"

namespace tg {
namespace {
struct Event {
  bool done = false;
  uint32_t block = 0;
  uint32_t peer = 0;
  double atMs = 0;
  uint64_t bytes = 0;
  RunOutcome outcome;
};
}  // namespace

struct EndpointWrap::Sink : RunSink {
  Napi::ThreadSafeFunction tsfn;
  const RunSpec* spec;
  void onBlock(uint32_t block, uint32_t peer, double atMs, uint64_t bytes) override {
    auto* ev = new Event{false, block, peer, atMs, bytes, {}};
    const RunSpec* s = spec;
    napi_status st = tsfn.NonBlockingCall(ev, [s](Napi::Env env, Napi::Function cb, Event* e) {
      if (static_cast<napi_env>(env) == nullptr) {  // the environment is going away: drop the event
        delete e;
        return;
      }
      Napi::Object o = Napi::Object::New(env);
      o.Set("kind", "block");
      o.Set("block", e->block);
      o.Set("from", s->peers[e->peer].id);
      o.Set("atMs", e->atMs);
      o.Set("bytes", static_cast<double>(e->bytes));
      delete e;
      cb.Call({o});
    });
    if (st != napi_ok) delete ev;
  }
};

Napi::Function EndpointWrap::Define(Napi::Env env) {
  return DefineClass(env, "Endpoint",
                     {InstanceMethod<&EndpointWrap::Start>("start"), InstanceMethod<&EndpointWrap::Cancel>("cancel"),
                      InstanceMethod<&EndpointWrap::Close>("close"),
                      InstanceMethod<&EndpointWrap::TakeRefusals>("takeRefusals"), InstanceAccessor<&EndpointWrap::Port>("port"),
                      InstanceAccessor<&EndpointWrap::TransportName>("transport"),
                      InstanceAccessor<&EndpointWrap::Fallback>("fallback"),
                      InstanceAccessor<&EndpointWrap::Running>("running"),
                      InstanceAccessor<&EndpointWrap::Closed>("closed")});
}

// new Endpoint(host, port, transport: "tcp" | "verbs" | "auto")
EndpointWrap::EndpointWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<EndpointWrap>(info), env_(info.Env()) {
  Napi::Env env = info.Env();
  if (info.Length() != 3 || !info[0].IsString() || !info[2].IsString()) {
    throwType(env, "Endpoint(host: string, port: number, transport: string) takes 3 arguments");
    return;
  }
  uint64_t port;
  if (!readUint(env, info[1], "port", 65535, port)) return;
  std::string pref = info[2].As<Napi::String>().Utf8Value();
  if (pref != "tcp" && pref != "verbs" && pref != "auto") {
    throwType(env, "transport must be \"tcp\", \"verbs\" or \"auto\", got \"" + pref + "\"");
    return;
  }
  std::string unavailable;
  transport_ = makeTransport(pref, fallback_, unavailable);
  if (!transport_) {
    throwError(env, "unavailable", unavailable);
    return;
  }
  std::string err = transport_->listen(info[0].As<Napi::String>().Utf8Value(), static_cast<uint16_t>(port));
  if (!err.empty()) {
    transport_.reset();
    throwError(env, "io", err);
    return;
  }
  data(env)->endpoints.insert(this);
}

EndpointWrap::~EndpointWrap() {
  Shutdown();
  if (AddonData* d = data(Env())) d->endpoints.erase(this);
}

void EndpointWrap::Shutdown() {
  if (transport_ && running_) transport_->cancel();
  if (thread_.joinable()) thread_.join();
  if (hookAdded_) {
    napi_remove_env_cleanup_hook(env_, &EndpointWrap::RunHook, this);
    hookAdded_ = false;
  }
  transport_.reset();
}

void EndpointWrap::RunHook(void* arg) {
  auto* self = static_cast<EndpointWrap*>(arg);
  self->hookAdded_ = false;
  if (self->transport_) self->transport_->cancel();
  if (self->thread_.joinable()) self->thread_.join();
}

void EndpointWrap::Finish() {
  if (thread_.joinable()) thread_.join();
  running_ = false;
  if (hookAdded_) {
    napi_remove_env_cleanup_hook(env_, &EndpointWrap::RunHook, this);
    hookAdded_ = false;
  }
  sink_.reset();
}

bool EndpointWrap::ParseSpec(Napi::Env env, Napi::Object o, uint32_t blockCount) {
  RunSpec s;
  uint64_t v;
  const uint64_t maxSafe = (1ull << 53) - 1;
  if (!readUint(env, o.Get("runId"), "spec.runId", maxSafe, v)) return false;
  s.runId = v;
  Napi::Value peers = o.Get("peers");
  if (!peers.IsArray() || peers.As<Napi::Array>().Length() == 0) return throwType(env, "spec.peers must be a non-empty array"), false;
  Napi::Array pa = peers.As<Napi::Array>();
  for (uint32_t i = 0; i < pa.Length(); i++) {
    Napi::Value pv = pa.Get(i);
    if (!pv.IsObject()) return throwType(env, "spec.peers[" + std::to_string(i) + "] must be an object"), false;
    Napi::Object po = pv.As<Napi::Object>();
    if (!po.Get("id").IsString() || !po.Get("host").IsString())
      return throwType(env, "spec.peers[" + std::to_string(i) + "] needs string id and host"), false;
    if (!readUint(env, po.Get("port"), ("spec.peers[" + std::to_string(i) + "].port").c_str(), 65535, v)) return false;
    s.peers.push_back(PeerAddr{po.Get("id").As<Napi::String>().Utf8Value(), po.Get("host").As<Napi::String>().Utf8Value(),
                               static_cast<uint16_t>(v)});
  }
  const uint32_t n = pa.Length();
  if (!readUint(env, o.Get("self"), "spec.self", n - 1, v)) return false;
  s.self = static_cast<uint32_t>(v);
  if (!readUint(env, o.Get("stallMs"), "spec.stallMs", 3600000, v)) return false;
  s.stallMs = static_cast<uint32_t>(v);
  if (!readUint(env, o.Get("connectMs"), "spec.connectMs", 3600000, v)) return false;
  s.connectMs = static_cast<uint32_t>(v);
  if (!readUint(env, o.Get("heartbeatMs"), "spec.heartbeatMs", 3600000, v)) return false;
  s.heartbeatMs = static_cast<uint32_t>(v);
  if (s.heartbeatMs == 0 || s.heartbeatMs >= s.stallMs) return throwType(env, "spec.heartbeatMs must be in (0, stallMs)"), false;
  Napi::Value pace = o.Get("paceBytesPerS");
  if (!pace.IsUndefined()) {
    if (!readUint(env, pace, "spec.paceBytesPerS", (1ull << 53) - 1, v)) return false;
    s.paceBytesPerS = v;
    if (v > 0 && std::string(transport_->name()) != "tcp") return throwType(env, "spec.paceBytesPerS is supported by the tcp transport only"), false;
  }
  Napi::Value mode = o.Get("sendMode");
  if (!mode.IsUndefined()) {
    std::string m = mode.IsString() ? mode.As<Napi::String>().Utf8Value() : "";
    if (m != "in-order" && m != "per-peer") return throwType(env, "spec.sendMode must be \"in-order\" or \"per-peer\""), false;
    s.perPeer = m == "per-peer";
  }
  Napi::Value sends = o.Get("sends");
  if (!sends.IsArray()) return throwType(env, "spec.sends must be an array"), false;
  Napi::Array sa = sends.As<Napi::Array>();
  for (uint32_t i = 0; i < sa.Length(); i++) {
    Napi::Value sv = sa.Get(i);
    if (!sv.IsObject()) return throwType(env, "spec.sends[" + std::to_string(i) + "] must be {peer, block}"), false;
    uint64_t peer, block;
    std::string at = "spec.sends[" + std::to_string(i) + "]";
    if (!readUint(env, sv.As<Napi::Object>().Get("peer"), (at + ".peer").c_str(), n - 1, peer) ||
        !readUint(env, sv.As<Napi::Object>().Get("block"), (at + ".block").c_str(), blockCount - 1, block))
      return false;
    if (peer == s.self) return throwType(env, at + ".peer is this node itself"), false;
    s.sends.push_back(SendOp{static_cast<uint32_t>(peer), static_cast<uint32_t>(block)});
  }
  Napi::Value expect = o.Get("expect");
  if (!expect.IsArray() || expect.As<Napi::Array>().Length() != n)
    return throwType(env, "spec.expect must be an array with one entry per peer"), false;
  Napi::Array ea = expect.As<Napi::Array>();
  std::vector<uint8_t> seen(blockCount, 0);
  s.expect.resize(n);
  for (uint32_t p = 0; p < n; p++) {
    Napi::Value ev = ea.Get(p);
    if (!ev.IsArray()) return throwType(env, "spec.expect[" + std::to_string(p) + "] must be an array of block indices"), false;
    Napi::Array blocks = ev.As<Napi::Array>();
    if (p == s.self && blocks.Length() > 0) return throwType(env, "spec.expect[self] must be empty"), false;
    for (uint32_t j = 0; j < blocks.Length(); j++) {
      if (!readUint(env, blocks.Get(j), ("spec.expect[" + std::to_string(p) + "][" + std::to_string(j) + "]").c_str(),
                    blockCount - 1, v))
        return false;
      if (seen[v]) return throwError(env, "invalid_plan", "block " + std::to_string(v) + " would arrive here twice"), false;
      seen[v] = 1;
      s.expect[p].push_back(static_cast<uint32_t>(v));
    }
  }
  Napi::Value pull = o.Get("pull");
  if (!pull.IsUndefined()) {
    if (!pull.IsBoolean()) return throwType(env, "spec.pull must be a boolean"), false;
    s.pull = pull.As<Napi::Boolean>().Value();
  }
  Napi::Value ro = o.Get("recvOrder");
  if (!ro.IsUndefined()) {
    if (!ro.IsArray()) return throwType(env, "spec.recvOrder must be an array of {peer, block}"), false;
    Napi::Array ra = ro.As<Napi::Array>();
    std::vector<std::vector<uint32_t>> byPeer(n);
    for (uint32_t i = 0; i < ra.Length(); i++) {
      Napi::Value rv = ra.Get(i);
      std::string at = "spec.recvOrder[" + std::to_string(i) + "]";
      if (!rv.IsObject()) return throwType(env, at + " must be {peer, block}"), false;
      uint64_t peer, block;
      if (!readUint(env, rv.As<Napi::Object>().Get("peer"), (at + ".peer").c_str(), n - 1, peer) ||
          !readUint(env, rv.As<Napi::Object>().Get("block"), (at + ".block").c_str(), blockCount - 1, block))
        return false;
      byPeer[peer].push_back(static_cast<uint32_t>(block));
      s.recvOrder.push_back(SendOp{static_cast<uint32_t>(peer), static_cast<uint32_t>(block)});
    }
    if (byPeer != s.expect) return throwType(env, "spec.recvOrder must list exactly spec.expect's blocks, in each peer's order"), false;
  }
  if (s.pull && s.recvOrder.empty())
    for (uint32_t p = 0; p < n; p++)
      for (uint32_t b : s.expect[p]) s.recvOrder.push_back(SendOp{p, b});
  spec_ = std::move(s);
  return true;
}

// start(spec, store, onEvent): runs this node's role; onEvent gets {kind:"block",...} per arrival and one
// {kind:"done", error, bytesSent, bytesReceived, elapsedMs, profile} at the end.
Napi::Value EndpointWrap::Start(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!transport_) return throwError(env, "closed", "the endpoint is closed");
  if (running_) return throwError(env, "busy", "this endpoint is already running a transfer");
  if (info.Length() != 3 || !info[0].IsObject() || !info[1].IsObject() || !info[2].IsFunction())
    return throwType(env, "start(spec: object, store: BlockStore, onEvent: function) takes 3 arguments");
  Napi::Object so = info[1].As<Napi::Object>();
  bool tagged = false;
  if (napi_check_object_type_tag(env, so, &kStoreTag, &tagged) != napi_ok || !tagged)
    return throwType(env, "start(): the second argument must be a BlockStore");
  StoreWrap* sw = StoreWrap::Unwrap(so);
  if (sw == nullptr) return throwType(env, "start(): the second argument must be a BlockStore");
  std::shared_ptr<StoreData> store = sw->store();
  if (!store) return throwError(env, "closed", "the block store is closed");
  if (!ParseSpec(env, info[0].As<Napi::Object>(), store->blockCount)) return env.Undefined();
  for (size_t p = 0; p < spec_.expect.size(); p++)
    for (uint32_t b : spec_.expect[p])
      if (store->has(b)) return throwError(env, "invalid_plan", "block " + std::to_string(b) + " is already present here");

  tsfn_ = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "tidegate-dataplane", 0, 1);
  sink_ = std::make_unique<Sink>();
  sink_->tsfn = tsfn_;
  sink_->spec = &spec_;
  napi_add_env_cleanup_hook(env, &EndpointWrap::RunHook, this);
  hookAdded_ = true;
  running_ = true;
  transport_->reset();
  Ref();
  Transport* t = transport_.get();
  thread_ = std::thread([this, t, store]() {
    RunOutcome out = t->run(spec_, store, *sink_);
    auto* ev = new Event{true, 0, 0, 0, 0, out};
    napi_status st = tsfn_.NonBlockingCall(ev, [this](Napi::Env env, Napi::Function cb, Event* e) {
      RunOutcome o = e->outcome;
      delete e;
      if (static_cast<napi_env>(env) == nullptr) return;  // teardown: the run cleanup hook joins the thread
      Finish();
      Unref();
      Napi::Object r = Napi::Object::New(env);
      r.Set("kind", "done");
      if (o.failure == Failure::None) r.Set("error", env.Null());
      else
        r.Set("error", makeError(env, failureName(o.failure), o.message,
                                 o.peer >= 0 ? spec_.peers[o.peer].id : std::string(), o.block));
      r.Set("bytesSent", static_cast<double>(o.bytesSent));
      r.Set("bytesReceived", static_cast<double>(o.bytesReceived));
      r.Set("elapsedMs", o.elapsedMs);
      Napi::Object p = Napi::Object::New(env);
      p.Set("startMonoMs", o.profile.startMonoMs);
      p.Set("dialMs", o.profile.dialMs);
      p.Set("firstByteMs", o.profile.firstByteMs);
      p.Set("lastByteMs", o.profile.lastByteMs);
      p.Set("checksumMs", o.profile.checksumMs);
      p.Set("recvCalls", static_cast<double>(o.profile.recvCalls));
      p.Set("sendCalls", static_cast<double>(o.profile.sendCalls));
      p.Set("waits", static_cast<double>(o.profile.waits));
      r.Set("profile", p);
      cb.Call({r});
    });
    if (st != napi_ok) delete ev;
    tsfn_.Release();
  });
  return env.Undefined();
}

Napi::Value EndpointWrap::Cancel(const Napi::CallbackInfo& info) {
  if (!transport_) return throwError(info.Env(), "closed", "the endpoint is closed");
  if (running_) transport_->cancel();
  return info.Env().Undefined();
}

Napi::Value EndpointWrap::Close(const Napi::CallbackInfo& info) {
  if (running_) return throwError(info.Env(), "busy", "cancel the running transfer and wait for it to end before close()");
  Shutdown();
  return info.Env().Undefined();
}

// takeRefusals(): [{reason, peer, count}] — what the data port refused since the last call ([] once closed).
Napi::Value EndpointWrap::TakeRefusals(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array arr = Napi::Array::New(env);
  if (!transport_) return arr;
  uint32_t i = 0;
  for (const Refusal& r : transport_->takeRefusals()) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("reason", r.reason);
    o.Set("peer", r.peer);
    o.Set("count", static_cast<double>(r.count));
    arr.Set(i++, o);
  }
  return arr;
}

Napi::Value EndpointWrap::Port(const Napi::CallbackInfo& info) {
  if (!transport_) return throwError(info.Env(), "closed", "the endpoint is closed");
  return Napi::Number::New(info.Env(), transport_->port());
}
Napi::Value EndpointWrap::TransportName(const Napi::CallbackInfo& info) {
  if (!transport_) return throwError(info.Env(), "closed", "the endpoint is closed");
  return Napi::String::New(info.Env(), transport_->name());
}
Napi::Value EndpointWrap::Fallback(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), fallback_); }
Napi::Value EndpointWrap::Running(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), running_); }
Napi::Value EndpointWrap::Closed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !transport_); }
}  // namespace tg
