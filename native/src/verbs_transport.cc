// Verbs side of the Transport port, compiled only where <infiniband/verbs.h> exists (binding.gyp, have_verbs): the
// device (opened once per endpoint), the transport object (control listener, cancel) and the test-fault switch.
// The data path is verbs::Runner (verbs_internal.h explains the design; verbs_qp.cc, verbs_runner.cc).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "verbs_internal.h"

namespace tg {
namespace verbs {
Device::~Device() {
  if (pd != nullptr) ibv_dealloc_pd(pd);
  if (ctx != nullptr) ibv_close_device(ctx);
}

namespace {
bool isIpv4Mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; i++)
    if (g.raw[i] != 0) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}
bool isZero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b != 0) return false;
  return true;
}
const char* portStateName(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    default: return "not active";
  }
}
}  // namespace

std::string openDevice(ibv_device* device, Device& d) {
  d.name = ibv_get_device_name(device);
  d.ctx = ibv_open_device(device);
  if (d.ctx == nullptr) return "ibv_open_device(" + d.name + ") failed: " + std::strerror(errno);
  d.pd = ibv_alloc_pd(d.ctx);
  if (d.pd == nullptr) return "ibv_alloc_pd on " + d.name + " failed: " + std::strerror(errno);
  ibv_port_attr pa{};
  if (ibv_query_port(d.ctx, d.port, &pa) != 0) return "ibv_query_port(" + d.name + ", 1) failed: " + std::strerror(errno);
  if (pa.state != IBV_PORT_ACTIVE)
    return "port 1 of " + d.name + " is " + portStateName(pa.state) + " (its network interface has no link)";
  d.lid = pa.lid;
  d.mtu = pa.active_mtu;
  d.maxMsg = pa.max_msg_sz;
  ibv_device_attr da{};
  if (ibv_query_device(d.ctx, &da) != 0) return "ibv_query_device(" + d.name + ") failed: " + std::strerror(errno);
  d.maxQpWr = static_cast<uint32_t>(da.max_qp_wr);
  // GID: TIDEGATE_VERBS_GID_INDEX when set; otherwise an IPv4-mapped RoCE v2 GID, else the first non-zero one.
  const char* forced = std::getenv("TIDEGATE_VERBS_GID_INDEX");
  int chosen = -1, firstNonZero = -1;
  for (int i = 0; i < pa.gid_tbl_len; i++) {
    ibv_gid g{};
    if (ibv_query_gid(d.ctx, d.port, i, &g) != 0 || isZero(g)) continue;
    if (forced != nullptr) {
      if (i == std::atoi(forced)) chosen = i;
      continue;
    }
    if (firstNonZero < 0) firstNonZero = i;
    ibv_gid_entry entry{};
    if (isIpv4Mapped(g) && ibv_query_gid_ex(d.ctx, d.port, static_cast<uint32_t>(i), &entry, 0) == 0 && entry.gid_type == IBV_GID_TYPE_ROCE_V2) {
      chosen = i;
      break;
    }
  }
  if (chosen < 0) chosen = firstNonZero;
  if (chosen < 0)
    return forced != nullptr ? "GID index " + std::string(forced) + " (TIDEGATE_VERBS_GID_INDEX) of " + d.name + " is empty"
                             : "port 1 of " + d.name + " has no GID (no IP address on its network interface)";
  d.gidIndex = chosen;
  ibv_query_gid(d.ctx, d.port, chosen, &d.gid);
  int fl = fcntl(d.ctx->async_fd, F_GETFL);
  fcntl(d.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
  return "";
}

FaultSpec faultFromEnv() {
  FaultSpec f;
  const char* v = std::getenv("TIDEGATE_VERBS_FAULT");
  if (v == nullptr || *v == '\0') return f;
  std::string s(v);
  std::string kind = s.substr(0, s.find(':'));
  if (s.find(':') != std::string::npos) f.block = std::atoll(s.c_str() + s.find(':') + 1);
  if (kind == "oversize") f.kind = Fault::Oversize;
  else if (kind == "bad-block") f.kind = Fault::BadBlock;
  else if (kind == "bad-rkey") f.kind = Fault::BadRkey;
  else if (kind == "corrupt") f.kind = Fault::Corrupt;
  else if (kind == "no-credits") f.kind = Fault::NoCredits;
  return f;
}

namespace {
class VerbsTransport : public ListeningTransport {
 public:
  Device device;
  const char* name() const override { return "verbs"; }
  RunOutcome run(const RunSpec& spec, std::shared_ptr<StoreData> store, RunSink& sink) override {
    RunOutcome out;
    {
      Runner r(device, spec, std::move(store), sink, listenFd_, wake_.fd());
      out = r.go();
    }  // every queue pair, region and the completion queue are released here, before the caller hears the outcome
    return out;
  }
};
}  // namespace
}  // namespace verbs

std::unique_ptr<Transport> makeVerbsTransport(ibv_device* dev, std::string& error) {
  auto t = std::make_unique<verbs::VerbsTransport>();
  error = verbs::openDevice(dev, t->device);
  if (!error.empty()) return nullptr;
  return t;
}
}  // namespace tg
