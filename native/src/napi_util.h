// Shared N-API helpers of the data plane addon: per-environment data (the JS error class, live objects for the
// cleanup hook), error construction, and strict argument readers that throw TypeError.
#pragma once
#include <napi.h>

#include <set>
#include <string>

namespace tg {
class StoreWrap;
class EndpointWrap;

/** Type tag marking objects created by BlockStore's constructor (napi_type_tag_object). */
inline const napi_type_tag kStoreTag = {0x7469646567617465ull, 0x626c6f636b73746full};

struct AddonData {
  Napi::FunctionReference errorCtor;
  std::set<StoreWrap*> stores;
  std::set<EndpointWrap*> endpoints;
};

inline AddonData* data(Napi::Env env) { return env.GetInstanceData<AddonData>(); }

inline Napi::Value makeError(Napi::Env env, const std::string& reason, const std::string& message, const std::string& peer = "",
                      int32_t block = -1) {
  Napi::Object details = Napi::Object::New(env);
  if (!peer.empty()) details.Set("peer", peer);
  if (block >= 0) details.Set("block", block);
  AddonData* d = data(env);
  if (d == nullptr || d->errorCtor.IsEmpty()) {
    Napi::Error e = Napi::Error::New(env, reason + ": " + message);
    return e.Value();
  }
  return d->errorCtor.New({Napi::String::New(env, reason), Napi::String::New(env, message), details});
}

inline Napi::Value throwError(Napi::Env env, const std::string& reason, const std::string& message) {
  if (env.IsExceptionPending()) return env.Undefined();
  Napi::Value e = makeError(env, reason, message);
  if (env.IsExceptionPending()) return env.Undefined();
  if (e.IsEmpty()) Napi::Error::New(env, reason + ": " + message).ThrowAsJavaScriptException();
  else Napi::Error(env, e).ThrowAsJavaScriptException();
  return env.Undefined();
}

inline Napi::Value throwType(Napi::Env env, const std::string& message) {
  Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

// Reads a non-negative integer ≤ max from v; false (and a pending TypeError) otherwise.
inline bool readUint(Napi::Env env, Napi::Value v, const char* what, uint64_t max, uint64_t& out) {
  if (!v.IsNumber()) {
    throwType(env, std::string(what) + " must be a number");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0) || d != static_cast<double>(static_cast<uint64_t>(d)) || d > static_cast<double>(max)) {
    throwType(env, std::string(what) + " must be an integer in [0, " + std::to_string(max) + "]");
    return false;
  }
  out = static_cast<uint64_t>(d);
  return true;
}

}  // namespace tg
