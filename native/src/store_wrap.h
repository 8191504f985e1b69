// BlockStore's JS class: a handle on a StoreData (see store.h). Every method checks its arguments (TypeError) and
// throws DataPlaneError("closed") after close().
#pragma once
#include <napi.h>

#include "napi_util.h"
#include "store.h"

namespace tg {
class StoreWrap : public Napi::ObjectWrap<StoreWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "BlockStore",
                       {InstanceMethod<&StoreWrap::FillPattern>("fillPattern"),
                        InstanceMethod<&StoreWrap::LoadFile>("loadFile"),
                        InstanceMethod<&StoreWrap::VerifyPattern>("verifyPattern"),
                        InstanceMethod<&StoreWrap::Has>("has"),
                        InstanceMethod<&StoreWrap::Checksum>("checksum"),
                        InstanceMethod<&StoreWrap::PresentCount>("presentCount"),
                        InstanceMethod<&StoreWrap::ReadBlock>("readBlock"),
                        InstanceMethod<&StoreWrap::CorruptBlock>("corruptBlock"),
                        InstanceMethod<&StoreWrap::Clear>("clear"),
                        InstanceMethod<&StoreWrap::Close>("close"),
                        InstanceAccessor<&StoreWrap::Closed>("closed"),
                        InstanceAccessor<&StoreWrap::Prefaulted>("prefaulted"),
                        InstanceAccessor<&StoreWrap::BlockCount>("blockCount"),
                        InstanceAccessor<&StoreWrap::BlockBytes>("blockBytes"),
                        InstanceAccessor<&StoreWrap::TotalBytes>("totalBytes")});
  }

  // new BlockStore(blockCount, blockBytes, totalBytes, memoryLimitBytes)
  explicit StoreWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<StoreWrap>(info) {
    Napi::Env env = info.Env();
    if (info.Length() != 4) {
      throwType(env, "BlockStore(blockCount, blockBytes, totalBytes, memoryLimitBytes) takes 4 arguments");
      return;
    }
    uint64_t count, bb, total, limit;
    const uint64_t maxSafe = (1ull << 53) - 1;
    if (!readUint(env, info[0], "blockCount", 1u << 20, count) || !readUint(env, info[1], "blockBytes", maxSafe, bb) ||
        !readUint(env, info[2], "totalBytes", maxSafe, total) || !readUint(env, info[3], "memoryLimitBytes", maxSafe, limit))
      return;
    if (count == 0 || bb == 0 || total == 0) {
      throwError(env, "invalid_plan", "a model needs at least one block of at least one byte (got " + std::to_string(count) +
                                          " blocks of " + std::to_string(bb) + " bytes)");
      return;
    }
    if (total > count * bb || total <= (count - 1) * bb) {
      throwType(env, "totalBytes " + std::to_string(total) + " does not fill " + std::to_string(count) + " blocks of " +
                         std::to_string(bb) + " bytes (the last block must be non-empty)");
      return;
    }
    uint64_t physical = physicalMemoryBytes();
    uint64_t cap = limit == 0 ? physical : limit;
    if (total > cap) {
      throwError(env, "over_memory", "a model of " + std::to_string(total) + " bytes (" + std::to_string(count) + " blocks of " +
                                         std::to_string(bb) + ") does not fit in " + std::to_string(cap) + " bytes of memory");
      return;
    }
    try {
      store_ = std::make_shared<StoreData>(static_cast<uint32_t>(count), bb, total);
    } catch (const std::bad_alloc&) {
      throwError(env, "over_memory", "cannot map " + std::to_string(total) + " bytes for the block store");
      return;
    }
    napi_type_tag_object(env, info.This(), &kStoreTag);
    data(env)->stores.insert(this);
  }
  ~StoreWrap() override {
    if (AddonData* d = data(Env())) d->stores.erase(this);
  }
  std::shared_ptr<StoreData> store() const { return store_; }
  void Release() { store_.reset(); }

 private:
  std::shared_ptr<StoreData> store_;

  bool live(Napi::Env env) {
    if (store_) return true;
    throwError(env, "closed", "the block store is closed");
    return false;
  }
  bool blockArg(const Napi::CallbackInfo& info, uint32_t& block) {
    if (!live(info.Env())) return false;
    if (info.Length() < 1) {
      throwType(info.Env(), "a block index is required");
      return false;
    }
    uint64_t b;
    if (!readUint(info.Env(), info[0], "block", store_->blockCount - 1, b)) return false;
    block = static_cast<uint32_t>(b);
    return true;
  }
  static bool seedArg(const Napi::CallbackInfo& info, uint64_t& seed) {
    if (info.Length() < 1) {
      throwType(info.Env(), "a seed is required");
      return false;
    }
    if (info[0].IsBigInt()) {
      bool lossless;
      seed = info[0].As<Napi::BigInt>().Uint64Value(&lossless);
      return true;
    }
    return readUint(info.Env(), info[0], "seed", (1ull << 53) - 1, seed);
  }
  Napi::Value FillPattern(const Napi::CallbackInfo& info) {
    uint64_t seed;
    if (!live(info.Env()) || !seedArg(info, seed)) return info.Env().Undefined();
    store_->fillPattern(seed);
    return info.Env().Undefined();
  }
  Napi::Value LoadFile(const Napi::CallbackInfo& info) {
    if (!live(info.Env())) return info.Env().Undefined();
    if (info.Length() < 1 || !info[0].IsString()) return throwType(info.Env(), "loadFile(path) needs a string path");
    std::string err = store_->loadFile(info[0].As<Napi::String>().Utf8Value());
    if (!err.empty()) return throwError(info.Env(), "io", err);
    return info.Env().Undefined();
  }
  Napi::Value VerifyPattern(const Napi::CallbackInfo& info) {
    uint64_t seed;
    if (!live(info.Env()) || !seedArg(info, seed)) return info.Env().Undefined();
    return Napi::Number::New(info.Env(), static_cast<double>(store_->firstPatternMismatch(seed)));
  }
  Napi::Value Has(const Napi::CallbackInfo& info) {
    uint32_t b;
    if (!blockArg(info, b)) return info.Env().Undefined();
    return Napi::Boolean::New(info.Env(), store_->has(b));
  }
  Napi::Value Checksum(const Napi::CallbackInfo& info) {
    uint32_t b;
    if (!blockArg(info, b)) return info.Env().Undefined();
    return Napi::Number::New(info.Env(), store_->checksums[b]);
  }
  Napi::Value PresentCount(const Napi::CallbackInfo& info) {
    if (!live(info.Env())) return info.Env().Undefined();
    uint32_t n = 0;
    for (uint32_t i = 0; i < store_->blockCount; i++) n += store_->has(i) ? 1 : 0;
    return Napi::Number::New(info.Env(), n);
  }
  Napi::Value ReadBlock(const Napi::CallbackInfo& info) {
    uint32_t b;
    if (!blockArg(info, b)) return info.Env().Undefined();
    return Napi::Buffer<uint8_t>::Copy(info.Env(), store_->base + store_->offset(b), store_->length(b));
  }
  // Test hook: flips one byte of block b in memory without updating its checksum (a corrupted block).
  Napi::Value CorruptBlock(const Napi::CallbackInfo& info) {
    uint32_t b;
    if (!blockArg(info, b)) return info.Env().Undefined();
    store_->base[store_->offset(b) + store_->length(b) / 2] ^= 0x5A;
    return info.Env().Undefined();
  }
  Napi::Value Clear(const Napi::CallbackInfo& info) {
    if (!live(info.Env())) return info.Env().Undefined();
    for (uint32_t i = 0; i < store_->blockCount; i++) store_->present[i].store(0);
    return info.Env().Undefined();
  }
  Napi::Value Close(const Napi::CallbackInfo& info) {
    store_.reset();
    return info.Env().Undefined();
  }
  Napi::Value Closed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), !store_); }
  Napi::Value Prefaulted(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), !store_ || store_->prefaultDone.load(std::memory_order_acquire));
  }
  Napi::Value BlockCount(const Napi::CallbackInfo& info) {
    return live(info.Env()) ? Napi::Number::New(info.Env(), store_->blockCount) : info.Env().Undefined();
  }
  Napi::Value BlockBytes(const Napi::CallbackInfo& info) {
    return live(info.Env()) ? Napi::Number::New(info.Env(), static_cast<double>(store_->blockBytes)) : info.Env().Undefined();
  }
  Napi::Value TotalBytes(const Napi::CallbackInfo& info) {
    return live(info.Env()) ? Napi::Number::New(info.Env(), static_cast<double>(store_->totalBytes)) : info.Env().Undefined();
  }
};

}  // namespace tg
