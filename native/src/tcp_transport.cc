// TCP transport: one epoll loop per running role. Data frames are written straight from the block store and read
// straight into it (no per-block allocation, writes of up to 8 MiB per call). A node forwards block i as soon as it
// has arrived and its checksum matched, while block i+1 keeps arriving on another connection (BlitzScale §3 chains;
// λScale §4.2 binomial steps are the same machinery with a different send order).
//
// Wire format: every frame starts with a 32-byte header {magic, version, type, block, checksum, length, runId};
// Hello (dialer → listener, names the dialing node), Data (header + block bytes), Heartbeat (both directions on an
// idle connection every heartbeatMs), Request (receiver → sender in pull mode: "send me your next block"). A peer
// from which nothing is heard for stallMs has failed. This file holds the Transport object (listener, cancel);
// the per-role loop is tcp::Runner (tcp_internal.h).
#include "tcp_internal.h"

namespace tg {
namespace {
using tcp::Runner;
class TcpTransport : public ListeningTransport {
 public:
  const char* name() const override { return "tcp"; }
  RunOutcome run(const RunSpec& spec, std::shared_ptr<StoreData> store, RunSink& sink) override {
    Runner r(spec, std::move(store), sink, listenFd_, wake_.fd());
    return r.go();
  }
};
}  // namespace

std::unique_ptr<Transport> makeTcpTransport() { return std::make_unique<TcpTransport>(); }
TcpCallBytes tcpCallBytes() { return {tcp::kMaxSend, tcp::kMaxRecv}; }

const char* failureName(Failure f) {
  switch (f) {
    case Failure::None: return "none";
    case Failure::Unreachable: return "peer_unreachable";
    case Failure::PeerFailed: return "peer_failed";
    case Failure::Stalled: return "peer_stalled";
    case Failure::Checksum: return "checksum_mismatch";
    case Failure::Cancelled: return "cancelled";
    case Failure::InvalidPlan: return "invalid_plan";
    case Failure::Io: return "io";
  }
  return "io";
}
}  // namespace tg