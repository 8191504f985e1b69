// Verbs side of the Transport port, compiled only where <infiniband/verbs.h> exists (binding.gyp, have_verbs).
// It opens the device, allocates a protection domain and registers a probe buffer, so a machine with a device learns
// at start-up whether RDMA memory registration works there. The RDMA data path (RC queue pairs, WRITE_WITH_IMM per
// block) is not part of this build: with a usable device the caller still gets TCP, and the fallback line says so.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport.h"

namespace tg {
std::unique_ptr<Transport> makeVerbsTransport(ibv_device* dev, std::string& error) {
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) {
    error = std::string("ibv_open_device(") + ibv_get_device_name(dev) + ") failed: " + std::strerror(errno);
    return nullptr;
  }
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (pd == nullptr) {
    error = std::string("ibv_alloc_pd failed: ") + std::strerror(errno);
    ibv_close_device(ctx);
    return nullptr;
  }
  void* buf = std::aligned_alloc(4096, 1 << 20);
  ibv_mr* mr = buf == nullptr ? nullptr : ibv_reg_mr(pd, buf, 1 << 20, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) error = std::string("ibv_reg_mr failed: ") + std::strerror(errno);
  else {
    error = std::string("device ") + ibv_get_device_name(dev) +
            " opened and memory registration works, but this build has no RDMA data path";
    ibv_dereg_mr(mr);
  }
  std::free(buf);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return nullptr;
}
}  // namespace tg
