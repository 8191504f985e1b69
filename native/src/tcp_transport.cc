// TCP transport: one epoll loop per running role. Data frames are written straight from the block store and read
// straight into it (no per-block allocation, writes of up to 8 MiB per call). A node forwards block i as soon as it
// has arrived and its checksum matched, while block i+1 keeps arriving on another connection (BlitzScale §3 chains;
// λScale §4.2 binomial steps are the same machinery with a different send order).
//
// Wire format: every frame starts with a 32-byte header {magic, version, type, block, checksum, length, runId};
// Hello (dialer → listener, names the dialing node), Data (header + block bytes), Heartbeat (both directions on an
// idle connection every heartbeatMs). A peer from which nothing is heard for stallMs has failed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <thread>

#include "checksum.h"
#include "transport.h"

namespace tg {
namespace {
constexpr uint32_t kMagic = 0x50444754;  // "TGDP"
constexpr uint16_t kVersion = 1;
enum FrameType : uint16_t { kHello = 1, kData = 2, kHeartbeat = 3, kRequest = 4 };
#pragma pack(push, 1)
struct Frame {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t block;
  uint32_t checksum;
  uint64_t length;
  uint64_t runId;
};
#pragma pack(pop)
static_assert(sizeof(Frame) == 32, "frame header is 32 bytes");
constexpr uint64_t kMaxWrite = 8ull << 20;
constexpr uint64_t kMaxRead = 8ull << 20;
// In-order lanes start a frame on a new connection only when the previous connection has at most this many bytes
// not yet handed to the network (SIOCOUTQNSD): one block on the wire at a time, as λScale's binomial steps
// assume (§4.2).
constexpr int kDrainedBytes = 64 << 10;

using Clock = std::chrono::steady_clock;
double msBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Conn {
  int fd = -1;
  bool outgoing = false;
  int32_t peer = -1;
  // write side
  uint8_t wBuf[8 * sizeof(Frame)];  // queued frame headers (control frames, then a data header)
  size_t wHdrOff = 0, wHdrLen = 0;
  uint32_t wBlock = 0;  // block of the data frame being written
  int credits = 0;      // outgoing, pull mode: blocks the receiver asked for and has not been sent yet
  bool released = false;  // incoming, pull mode: the next block was requested for the frame being read
  const uint8_t* wPay = nullptr;
  uint64_t wPayLeft = 0;
  // read side
  Frame rHdr{};
  size_t rHdrOff = 0;
  uint8_t* rPay = nullptr;
  uint64_t rPayLeft = 0;
  StreamingChecksum rSum;  // the arriving block's checksum, computed as its bytes land
  size_t nextExpect = 0;
  bool helloSeen = false;
  bool sendDone = false;  // outgoing: every frame written and SHUT_WR sent
  bool laneBusy = false;  // outgoing: a lane is writing (or about to write) a data frame here
  bool finished = false;  // nothing more to do on this connection
  uint32_t events = 0;
  Clock::time_point lastHeard, lastHeartbeat, accepted;
  bool pending() const { return wHdrOff < wHdrLen || wPayLeft > 0; }
};

class TcpTransport;

class Runner {
 public:
  Runner(const RunSpec& s, std::shared_ptr<StoreData> st, RunSink& k, int listenFd, int wakeFd)
      : spec(s), store(std::move(st)), sink(k), lfd(listenFd), wfd(wakeFd) {}
  ~Runner() {
    for (auto& c : conns)
      if (c->fd >= 0) close(c->fd);
    if (ep >= 0) close(ep);
  }
  RunOutcome go();

 private:
  const RunSpec& spec;
  std::shared_ptr<StoreData> store;
  RunSink& sink;
  int lfd, wfd, ep = -1;
  std::vector<std::unique_ptr<Conn>> conns;
  std::vector<Conn*> outBy, inBy;
  // A lane is an ordered list of sends run one at a time: one lane for all sends ("in-order", λScale steps), or
  // one lane per peer ("per-peer", so a source feeding several chains feeds them concurrently, BlitzScale §5.1).
  struct Lane {
    std::vector<SendOp> ops;
    size_t idx = 0;
    Conn* active = nullptr;  // connection carrying ops[idx]
    bool armed = false;      // ops[idx]'s frame is queued on `active`
    Conn* last = nullptr;    // connection of the previous frame (in-order lanes wait for it to drain)
  };
  bool waitingDrain = false;  // some lane waits for a kernel send queue to drain: poll every millisecond
  std::vector<Lane> lanes;
  std::vector<size_t> sendsLeft;  // per peer: data frames still to send to it
  bool lanesDone() const {
    for (const Lane& l : lanes)
      if (l.idx < l.ops.size() || l.active != nullptr) return false;
    return true;
  }
  bool pumpLane(Lane& l);
  size_t inRemaining = 0;
  Clock::time_point t0, loopStart;
  RunOutcome out;

  std::string peerName(int32_t p) const {
    if (p < 0 || static_cast<size_t>(p) >= spec.peers.size()) return "an unknown peer";
    const PeerAddr& a = spec.peers[p];
    return "peer " + a.id + " (" + a.host + ":" + std::to_string(a.port) + ")";
  }
  bool fail(Failure f, int32_t peer, int32_t block, const std::string& msg) {
    if (out.failure == Failure::None) {
      out.failure = f;
      out.peer = peer;
      out.block = block;
      out.message = msg;
    }
    return false;
  }
  bool failed() const { return out.failure != Failure::None; }
  bool connectAll();
  bool watch(Conn* c, uint32_t ev);
  int flush(Conn* c);
  bool pump();
  bool onReadable(Conn* c);
  bool onIncomingFrame(Conn* c);
  bool onPayloadDone(Conn* c);
  bool housekeeping(Clock::time_point now);
  // Appends a frame header to c's queue; false when the queue is full (only control frames can be dropped).
  bool queueHeader(Conn* c, uint16_t type, uint32_t block, uint32_t crc, uint64_t len) {
    if (c->wHdrOff == c->wHdrLen) c->wHdrOff = c->wHdrLen = 0;
    if (c->wHdrLen + sizeof(Frame) > sizeof c->wBuf) return false;
    Frame f{kMagic, kVersion, type, block, crc, len, spec.runId};
    std::memcpy(c->wBuf + c->wHdrLen, &f, sizeof f);
    c->wHdrLen += sizeof f;
    if (type == kData) c->wBlock = block;
    return true;
  }
  // Pull mode (λScale binomial steps): this node asks for one block at a time, in step order, so its downlink
  // carries one block at a time; the next request goes out when the current block is 7/8 in.
  size_t recvIdx = 0;
  int outstanding = 0;
  bool requestNext();
};

bool Runner::watch(Conn* c, uint32_t ev) {
  if (c->events == ev) return true;
  epoll_event e{};
  e.events = ev;
  e.data.ptr = c;
  int op = c->events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
  if (epoll_ctl(ep, op, c->fd, &e) != 0) return fail(Failure::Io, c->peer, -1, std::string("epoll_ctl: ") + std::strerror(errno));
  c->events = ev;
  return true;
}

// Dials every peer this node sends to, retrying refused connections until connectMs; no data moves until all
// are connected, so an unreachable peer fails the role before any byte of the model is sent.
bool Runner::connectAll() {
  struct Dial {
    int32_t peer = -1;
    int fd = -1;
    addrinfo* ai = nullptr;
    Clock::time_point retryAt;
    std::string lastError = "no answer";
  };
  std::vector<Dial> dials;
  for (size_t p = 0; p < spec.peers.size(); p++)
    if (sendsLeft[p] > 0) {
      Dial d;
      d.peer = static_cast<int32_t>(p);
      dials.push_back(d);
    }
  auto freeAll = [&]() {
    for (auto& d : dials) {
      if (d.fd >= 0) close(d.fd);
      if (d.ai != nullptr) freeaddrinfo(d.ai);
    }
  };
  for (auto& d : dials) {
    const PeerAddr& a = spec.peers[d.peer];
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &d.ai);
    if (rc != 0) {
      freeAll();
      return fail(Failure::Unreachable, d.peer, -1, peerName(d.peer) + " is unreachable: cannot resolve host: " + gai_strerror(rc));
    }
    d.retryAt = Clock::now();
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(spec.connectMs);
  size_t done = 0;
  while (done < dials.size()) {
    Clock::time_point now = Clock::now();
    std::vector<pollfd> pfds;
    std::vector<Dial*> which;
    for (auto& d : dials) {
      if (d.fd == -2) continue;  // connected
      if (d.fd < 0 && now >= d.retryAt) {
        d.fd = socket(d.ai->ai_family, d.ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (d.fd < 0) {
          freeAll();
          return fail(Failure::Io, d.peer, -1, std::string("socket: ") + std::strerror(errno));
        }
        if (connect(d.fd, d.ai->ai_addr, d.ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
          d.lastError = std::strerror(errno);
          close(d.fd);
          d.fd = -1;
          d.retryAt = now + std::chrono::milliseconds(25);
          continue;
        }
      }
      if (d.fd >= 0) {
        pfds.push_back(pollfd{d.fd, POLLOUT, 0});
        which.push_back(&d);
      }
    }
    pfds.push_back(pollfd{wfd, POLLIN, 0});
    if (now >= deadline) {
      for (auto& d : dials)
        if (d.fd != -2) {
          std::string msg = peerName(d.peer) + " is unreachable: " + d.lastError + " (gave up after " +
                            std::to_string(spec.connectMs) + " ms, before any block was sent)";
          int32_t p = d.peer;
          freeAll();
          return fail(Failure::Unreachable, p, -1, msg);
        }
    }
    int n = poll(pfds.data(), pfds.size(), 20);
    if (n < 0 && errno != EINTR) {
      freeAll();
      return fail(Failure::Io, -1, -1, std::string("poll: ") + std::strerror(errno));
    }
    if (pfds.back().revents & POLLIN) {
      freeAll();
      return fail(Failure::Cancelled, -1, -1, "transfer cancelled");
    }
    for (size_t i = 0; i + 1 < pfds.size(); i++) {
      if (pfds[i].revents == 0) continue;
      Dial* d = which[i];
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        d->lastError = std::strerror(err);
        close(d->fd);
        d->fd = -1;
        d->retryAt = Clock::now() + std::chrono::milliseconds(25);
        continue;
      }
      int one = 1;
      setsockopt(d->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_unique<Conn>();
      c->fd = d->fd;
      c->outgoing = true;
      c->peer = d->peer;
      c->helloSeen = true;
      c->lastHeard = c->lastHeartbeat = Clock::now();
      queueHeader(c.get(), kHello, spec.self, 0, 0);
      outBy[d->peer] = c.get();
      conns.push_back(std::move(c));
      d->fd = -2;
      done++;
    }
  }
  for (auto& d : dials)
    if (d.ai != nullptr) freeaddrinfo(d.ai);
  return true;
}

// Writes what is pending on c. 1: nothing left; 0: would block; -1: error (recorded).
int Runner::flush(Conn* c) {
  while (c->wHdrOff < c->wHdrLen) {
    ssize_t n = send(c->fd, c->wBuf + c->wHdrOff, c->wHdrLen - c->wHdrOff,
                     MSG_NOSIGNAL | (c->wPayLeft > 0 ? MSG_MORE : 0));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " failed: send: " + std::strerror(errno));
      return -1;
    }
    c->wHdrOff += static_cast<size_t>(n);
  }
  while (c->wPayLeft > 0) {
    ssize_t n = send(c->fd, c->wPay, c->wPayLeft < kMaxWrite ? c->wPayLeft : kMaxWrite, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(c->wBlock),
           peerName(c->peer) + " failed while receiving block " + std::to_string(c->wBlock) + ": " + std::strerror(errno));
      return -1;
    }
    c->wPay += n;
    c->wPayLeft -= static_cast<uint64_t>(n);
    out.bytesSent += static_cast<uint64_t>(n);
  }
  return 1;
}

// Advances every lane as far as blocks are present and sockets accept bytes.
bool Runner::pump() {
  waitingDrain = false;
  for (Lane& l : lanes)
    if (!pumpLane(l)) return false;
  return true;
}

bool Runner::pumpLane(Lane& l) {
  for (;;) {
    if (l.active != nullptr) {
      Conn* c = l.active;
      int r = flush(c);
      if (r < 0) return false;
      if (r == 0) return watch(c, static_cast<uint32_t>(EPOLLIN | EPOLLOUT));
      if (l.armed) {
        l.armed = false;
        if (--sendsLeft[c->peer] == 0) {
          shutdown(c->fd, SHUT_WR);
          c->sendDone = true;
        }
        l.idx++;
      }
      if (!watch(c, EPOLLIN)) return false;
      c->laneBusy = false;
      l.active = nullptr;
    }
    if (l.idx >= l.ops.size()) return true;
    const SendOp& op = l.ops[l.idx];
    if (!store->has(op.block)) return true;  // waits for the block to arrive
    Conn* c = outBy[op.peer];
    if (c->laneBusy) return true;  // in-order lanes never share a connection; kept for safety
    if (spec.pull && c->credits == 0) return true;  // the receiver has not asked for it yet
    if (!spec.perPeer && l.last != nullptr && l.last != c && l.last->fd >= 0) {
      int queued = 0;
      if (ioctl(l.last->fd, SIOCOUTQNSD, &queued) == 0 && queued > kDrainedBytes) {
        waitingDrain = true;
        return true;
      }
    }
    l.last = c;
    l.active = c;
    c->laneBusy = true;
    if (c->pending()) continue;  // a heartbeat is still going out; flush it first
    if (spec.pull) c->credits--;
    queueHeader(c, kData, op.block, store->checksums[op.block], store->length(op.block));
    c->wPay = store->base + store->offset(op.block);
    c->wPayLeft = store->length(op.block);
    l.armed = true;
  }
}

bool Runner::requestNext() {
  while (spec.pull && outstanding == 0 && recvIdx < spec.recvOrder.size()) {
    const SendOp& r = spec.recvOrder[recvIdx];
    Conn* c = inBy[r.peer];
    if (c == nullptr || c->fd < 0) return true;  // asked once its hello arrives
    if (!queueHeader(c, kRequest, r.block, 0, 0)) return true;  // queue full: housekeeping asks again
    recvIdx++;
    outstanding++;
    int w = flush(c);
    if (w < 0) return false;
    if (!watch(c, EPOLLIN | (w == 0 ? static_cast<uint32_t>(EPOLLOUT) : 0u))) return false;
  }
  return true;
}

bool Runner::onPayloadDone(Conn* c) {
  uint32_t block = c->rHdr.block;
  uint64_t len = store->length(block);
  uint32_t got = c->rSum.finish();
  if (got != c->rHdr.checksum) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ": checksum mismatch (computed %08x, sender said %08x)", got, c->rHdr.checksum);
    return fail(Failure::Checksum, c->peer, static_cast<int32_t>(block),
                "block " + std::to_string(block) + " from " + peerName(c->peer) + buf);
  }
  store->markPresent(block, got);
  if (spec.pull && !c->released) {
    c->released = true;
    outstanding--;
  }
  sink.onBlock(block, static_cast<uint32_t>(c->peer), msBetween(t0, Clock::now()), len);
  if (!requestNext()) return false;
  c->nextExpect++;
  c->rHdrOff = 0;
  if (c->nextExpect == spec.expect[c->peer].size()) {
    c->finished = true;
    inRemaining--;
  }
  return true;
}

bool Runner::onIncomingFrame(Conn* c) {
  const Frame& f = c->rHdr;
  if (f.magic != kMagic || f.version != kVersion || f.runId != spec.runId) {
    if (!c->helloSeen) {  // a stale or foreign dialer: drop it, it is not part of this run
      c->finished = true;
      return true;
    }
    return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent a malformed frame header");
  }
  if (!c->helloSeen) {
    if (f.type != kHello || f.block >= spec.peers.size() || spec.expect[f.block].empty())
      return fail(Failure::InvalidPlan, static_cast<int32_t>(f.block), -1,
                  peerName(static_cast<int32_t>(f.block)) + " dialed this node but the plan sends nothing from it here");
    if (inBy[f.block] != nullptr)
      return fail(Failure::InvalidPlan, static_cast<int32_t>(f.block), -1, peerName(static_cast<int32_t>(f.block)) + " dialed twice");
    c->peer = static_cast<int32_t>(f.block);
    c->helloSeen = true;
    inBy[f.block] = c;
    c->rHdrOff = 0;
    return requestNext();
  }
  if (f.type == kHeartbeat) {
    c->rHdrOff = 0;
    return true;
  }
  if (f.type != kData || c->outgoing)
    return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent an unexpected frame type " + std::to_string(f.type));
  const auto& exp = spec.expect[c->peer];
  if (c->nextExpect >= exp.size() || f.block != exp[c->nextExpect])
    return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(f.block),
                peerName(c->peer) + " sent block " + std::to_string(f.block) + " out of plan order");
  if (f.block >= store->blockCount || f.length != store->length(f.block))
    return fail(Failure::PeerFailed, c->peer, static_cast<int32_t>(f.block),
                peerName(c->peer) + " sent block " + std::to_string(f.block) + " with length " + std::to_string(f.length));
  c->released = false;
  c->rSum.reset(store->base + store->offset(f.block), f.length);
  c->rPay = store->base + store->offset(f.block);
  c->rPayLeft = f.length;
  if (c->rPayLeft == 0) return onPayloadDone(c);
  return true;
}

bool Runner::onReadable(Conn* c) {
  for (int rounds = 0; rounds < 64 && !c->finished; rounds++) {
    ssize_t n;
    if (c->rPayLeft > 0) {
      n = recv(c->fd, c->rPay, c->rPayLeft < kMaxRead ? c->rPayLeft : kMaxRead, 0);
    } else {
      n = recv(c->fd, reinterpret_cast<uint8_t*>(&c->rHdr) + c->rHdrOff, sizeof(Frame) - c->rHdrOff, 0);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (c->outgoing && c->sendDone) {
        c->finished = true;
        return true;
      }
      return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " failed: " + std::strerror(errno));
    }
    if (n == 0) {
      if (!c->helloSeen) {
        c->finished = true;
        return true;
      }
      if (c->outgoing && c->sendDone) {  // the receiver has everything and closed: this connection is done
        c->finished = true;
        return true;
      }
      std::string where = c->outgoing ? " closed the connection before receiving every block"
                                      : " closed the connection after " + std::to_string(c->nextExpect) + " of " +
                                            std::to_string(spec.expect[c->peer].size()) + " blocks";
      return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + where);
    }
    c->lastHeard = Clock::now();
    if (c->outgoing) {  // from the receiver: heartbeats (liveness only) and, in pull mode, block requests
      c->rHdrOff += static_cast<size_t>(n);
      if (c->rHdrOff == sizeof(Frame)) {
        c->rHdrOff = 0;
        if (c->rHdr.magic != kMagic || c->rHdr.runId != spec.runId)
          return fail(Failure::PeerFailed, c->peer, -1, peerName(c->peer) + " sent a malformed frame header");
        if (c->rHdr.type == kRequest) {
          c->credits++;
          if (!pump()) return false;
        }
      }
      continue;
    }
    if (c->rPayLeft > 0) {
      c->rPay += n;
      c->rPayLeft -= static_cast<uint64_t>(n);
      out.bytesReceived += static_cast<uint64_t>(n);
      c->rSum.advance(c->rHdr.length - c->rPayLeft);
      if (spec.pull && !c->released && c->rPayLeft <= c->rHdr.length / 8) {
        c->released = true;
        outstanding--;
        if (!requestNext()) return false;
      }
      if (c->rPayLeft == 0) {
        if (!onPayloadDone(c)) return false;
        if (!pump()) return false;
      }
    } else {
      c->rHdrOff += static_cast<size_t>(n);
      if (c->rHdrOff == sizeof(Frame) && !onIncomingFrame(c)) return false;
    }
  }
  return true;
}

bool Runner::housekeeping(Clock::time_point now) {
  for (auto& cp : conns) {
    Conn* c = cp.get();
    if (c->finished) continue;
    if (!c->helloSeen) {
      if (msBetween(c->accepted, now) > spec.connectMs) c->finished = true;
      continue;
    }
    if (msBetween(c->lastHeard, now) > spec.stallMs)
      return fail(Failure::Stalled, c->peer, -1,
                  peerName(c->peer) + " stalled: nothing heard for " + std::to_string(static_cast<long>(msBetween(c->lastHeard, now))) + " ms");
    bool idleOut = c->outgoing && !c->sendDone && !c->laneBusy;
    bool idleIn = !c->outgoing;
    if ((idleOut || idleIn) && !c->pending() && msBetween(c->lastHeartbeat, now) >= spec.heartbeatMs) {
      queueHeader(c, kHeartbeat, 0, 0, 0);
      c->lastHeartbeat = now;
      int r = flush(c);
      if (r < 0) return false;
      if (!watch(c, EPOLLIN | (r == 0 ? static_cast<uint32_t>(EPOLLOUT) : 0u))) return false;
    }
  }
  for (size_t p = 0; p < spec.peers.size(); p++)
    if (!spec.expect[p].empty() && inBy[p] == nullptr && msBetween(loopStart, now) > spec.connectMs + spec.stallMs)
      return fail(Failure::PeerFailed, static_cast<int32_t>(p), -1,
                  peerName(static_cast<int32_t>(p)) + " never connected (waited " + std::to_string(spec.connectMs + spec.stallMs) + " ms)");
  if (!requestNext()) return false;
  if (inRemaining == 0)
    for (const Lane& l : lanes)
      if (l.idx < l.ops.size() && l.active == nullptr && !store->has(l.ops[l.idx].block))
        return fail(Failure::InvalidPlan, static_cast<int32_t>(l.ops[l.idx].peer), static_cast<int32_t>(l.ops[l.idx].block),
                    "block " + std::to_string(l.ops[l.idx].block) + " never arrives here, but the plan forwards it to " +
                        peerName(static_cast<int32_t>(l.ops[l.idx].peer)));
  return true;
}

RunOutcome Runner::go() {
  t0 = Clock::now();
  const size_t n = spec.peers.size();
  outBy.assign(n, nullptr);
  inBy.assign(n, nullptr);
  sendsLeft.assign(n, 0);
  for (const SendOp& op : spec.sends) sendsLeft[op.peer]++;
  if (spec.perPeer) {
    std::vector<int> laneOf(n, -1);
    for (const SendOp& op : spec.sends) {
      if (laneOf[op.peer] < 0) {
        laneOf[op.peer] = static_cast<int>(lanes.size());
        lanes.emplace_back();
      }
      lanes[laneOf[op.peer]].ops.push_back(op);
    }
  } else {
    lanes.emplace_back();
    lanes[0].ops = spec.sends;
  }
  for (size_t p = 0; p < n; p++)
    if (!spec.expect[p].empty()) inRemaining++;
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) fail(Failure::Io, -1, -1, std::string("epoll_create1: ") + std::strerror(errno));
  Conn lconn, wconn;  // markers for the listener and the wake fd
  lconn.fd = lfd;
  wconn.fd = wfd;
  if (!failed() && connectAll()) {
    loopStart = Clock::now();
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.ptr = &lconn;
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &e);
    e.data.ptr = &wconn;
    epoll_ctl(ep, EPOLL_CTL_ADD, wfd, &e);
    for (auto& c : conns)
      if (flush(c.get()) < 0 || !watch(c.get(), EPOLLIN | (c->pending() ? static_cast<uint32_t>(EPOLLOUT) : 0u))) break;
    if (!failed()) pump();
    epoll_event evs[64];
    while (!failed()) {
      bool outsDone = true;
      for (auto& c : conns)
        if (c->outgoing && !c->finished) outsDone = false;
      if (inRemaining == 0 && lanesDone() && outsDone) break;
      int k = epoll_wait(ep, evs, 64, waitingDrain ? 1 : 50);
      if (k < 0 && errno != EINTR) {
        fail(Failure::Io, -1, -1, std::string("epoll_wait: ") + std::strerror(errno));
        break;
      }
      for (int i = 0; i < k && !failed(); i++) {
        Conn* c = static_cast<Conn*>(evs[i].data.ptr);
        if (c == &wconn) {
          fail(Failure::Cancelled, -1, -1, "transfer cancelled");
          break;
        }
        if (c == &lconn) {
          for (;;) {
            int fd = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) break;
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            auto nc = std::make_unique<Conn>();
            nc->fd = fd;
            nc->accepted = nc->lastHeard = nc->lastHeartbeat = Clock::now();
            Conn* raw = nc.get();
            conns.push_back(std::move(nc));
            if (!watch(raw, EPOLLIN)) break;
          }
          continue;
        }
        if (c->finished) continue;
        if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
          if (!onReadable(c)) break;
        }
        if (!c->finished && (evs[i].events & EPOLLOUT)) {
          if (c->laneBusy) {
            if (!pump()) break;
          } else {
            int r = flush(c);
            if (r < 0) break;
            if (!watch(c, EPOLLIN | (r == 0 ? static_cast<uint32_t>(EPOLLOUT) : 0u))) break;
          }
        }
        if (c->finished && c->fd >= 0) {
          epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
          close(c->fd);
          c->fd = -1;
        }
      }
      if (!failed() && waitingDrain) pump();
      if (!failed()) housekeeping(Clock::now());
      for (auto& c : conns)
        if (c->finished && c->fd >= 0) {
          epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
          close(c->fd);
          c->fd = -1;
        }
    }
  }
  if (failed()) {
    // Reset connections so peers learn at once (unread data makes close() send RST).
    for (auto& c : conns)
      if (c->fd >= 0) {
        linger lg{1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      }
  }
  out.elapsedMs = msBetween(t0, Clock::now());
  return out;
}

class TcpTransport : public Transport {
 public:
  TcpTransport() { wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
  ~TcpTransport() override {
    if (listenFd_ >= 0) close(listenFd_);
    if (wakeFd_ >= 0) close(wakeFd_);
  }
  const char* name() const override { return "tcp"; }
  std::string listen(const std::string& host, uint16_t port) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* ai = nullptr;
    int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &ai);
    if (rc != 0) return "cannot resolve " + host + ": " + gai_strerror(rc);
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      std::string msg = "cannot listen on " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
      if (fd >= 0) close(fd);
      freeaddrinfo(ai);
      return msg;
    }
    freeaddrinfo(ai);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                          : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    listenFd_ = fd;
    return "";
  }
  uint16_t port() const override { return port_; }
  RunOutcome run(const RunSpec& spec, std::shared_ptr<StoreData> store, RunSink& sink) override {
    Runner r(spec, std::move(store), sink, listenFd_, wakeFd_);
    return r.go();
  }
  void cancel() override {
    uint64_t one = 1;
    ssize_t n = write(wakeFd_, &one, sizeof one);
    (void)n;
  }
  void reset() override {
    uint64_t v;
    while (read(wakeFd_, &v, sizeof v) > 0) {
    }
  }

 private:
  int listenFd_ = -1;
  int wakeFd_ = -1;
  uint16_t port_ = 0;
};
}  // namespace

std::unique_ptr<Transport> makeTcpTransport() { return std::make_unique<TcpTransport>(); }

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
