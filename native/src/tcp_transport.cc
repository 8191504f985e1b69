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
//
// Boundary refusals (issue 32). Between runs an idle gate thread accepts what arrives on the data port and reads
// (MSG_PEEK, nothing consumed) its first frame header: a well-formed Hello is parked, untouched, for the next run to
// adopt (a peer may dial before this node's run starts); anything else is refused and closed — `bad_magic` (not
// "TGDP"), `bad_handshake` (another version or frame type, or closed inside the header), `frame_too_large` (a Hello
// with a payload), `handshake_timeout` (no full header within kGateHandshakeMs), `too_many_connections` (more than
// kGateMaxHeld held at once). During a run the Runner refuses the same way, plus `bad_frame` / `frame_too_large` from
// a peer of the run (which also fails the role). Refusals are counted in the transport's RefusalLog, which JS drains
// (Endpoint.takeRefusals) and reports (core/boundary.ts). The gate never runs while a run does: run() takes every
// connection it holds and the listener is the Runner's until the run ends.
#include "tcp_internal.h"

#include <mutex>

namespace tg {
namespace {
using tcp::Runner;
constexpr int kGateHandshakeMs = 2000;  // an idle connection must send its first frame header within this
constexpr int kGateParkMs = 10000;      // a parked Hello no run adopted within this is closed (its sender gave up)
constexpr size_t kGateMaxHeld = 64;     // connections the gate holds at once (inspected or parked)

class TcpTransport : public ListeningTransport {
 public:
  ~TcpTransport() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    gateWake_.wake();
    if (gate_.joinable()) gate_.join();
    for (const Held& h : held_) close(h.fd);
  }
  const char* name() const override { return "tcp"; }
  std::string listen(const std::string& host, uint16_t port) override {
    std::string err = ListeningTransport::listen(host, port);
    if (err.empty()) gate_ = std::thread([this] { gateLoop(); });
    return err;
  }
  RunOutcome run(const RunSpec& spec, std::shared_ptr<StoreData> store, RunSink& sink) override {
    std::vector<int> adopted;
    {
      std::lock_guard<std::mutex> g(mu_);
      running_ = true;
      for (const Held& h : held_) adopted.push_back(h.fd);
      held_.clear();
    }
    gateWake_.wake();
    RunOutcome out;
    {
      Runner r(spec, std::move(store), sink, listenFd_, wake_.fd(), std::move(adopted), refusals_);
      out = r.go();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      running_ = false;
    }
    gateWake_.wake();
    return out;
  }

 private:
  struct Held {
    int fd;
    tcp::Clock::time_point since;
    bool parked;
    std::string peer;
  };
  std::mutex mu_;
  bool running_ = false, stop_ = false;
  std::vector<Held> held_;  // guarded by mu_
  WakeFd gateWake_;
  std::thread gate_;

  // Reads what `h` has sent so far without consuming it; true when it is done with (refused, or closed).
  bool inspect(Held& h, tcp::Clock::time_point now) {
    tcp::Frame f{};
    ssize_t n = recv(h.fd, &f, sizeof f, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) n = -2;
    if (n == 0 || n == -1) return true;  // closed (or reset) without a byte: a probe, not garbage
    const size_t got = n > 0 ? static_cast<size_t>(n) : 0;
    const char* reason = nullptr;
    if (got >= sizeof f.magic && f.magic != tcp::kMagic) reason = "bad_magic";
    else if (got == sizeof f && (f.version != tcp::kVersion || f.type != tcp::kHello)) reason = "bad_handshake";
    else if (got == sizeof f && f.length != 0) reason = "frame_too_large";
    else if (got == sizeof f) {
      h.parked = true;
      h.since = now;
      return false;
    } else {
      pollfd p{h.fd, POLLRDHUP, 0};
      if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) reason = "bad_handshake";
      else if (tcp::msBetween(h.since, now) > kGateHandshakeMs) reason = "handshake_timeout";
    }
    if (reason == nullptr) return false;
    refusals_.add(reason, h.peer);
    linger lg{1, 0};  // reset: the refused bytes are not read
    setsockopt(h.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    return true;
  }

  void gateLoop() {
    for (;;) {
      std::vector<pollfd> pfds;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (stop_) return;
        pfds.push_back(pollfd{gateWake_.fd(), POLLIN, 0});
        if (!running_) {
          pfds.push_back(pollfd{listenFd_, POLLIN, 0});
          for (const Held& h : held_)
            if (!h.parked) pfds.push_back(pollfd{h.fd, POLLIN | POLLRDHUP, 0});
        }
      }
      poll(pfds.data(), pfds.size(), 250);
      gateWake_.drain();
      std::lock_guard<std::mutex> g(mu_);
      if (stop_) return;
      if (running_) continue;
      const auto now = tcp::Clock::now();
      for (;;) {
        int fd = acceptNext(listenFd_);
        if (fd < 0) break;
        std::string peer = remoteAddress(fd);
        if (held_.size() >= kGateMaxHeld) {
          refusals_.add("too_many_connections", peer);
          close(fd);
          continue;
        }
        held_.push_back(Held{fd, now, false, std::move(peer)});
      }
      for (size_t i = 0; i < held_.size();) {
        Held& h = held_[i];
        bool done = h.parked ? tcp::msBetween(h.since, now) > kGateParkMs : inspect(h, now);
        if (done) {
          close(h.fd);
          held_[i] = std::move(held_.back());
          held_.pop_back();
        } else {
          i++;
        }
      }
    }
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