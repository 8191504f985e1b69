// Internals of the TCP transport (see tcp_transport.cc for the wire format): frame header, per-connection state and
// the Runner, which runs one node's role in one epoll loop. Split by job: tcp_send.cc (lanes, writes), tcp_receive.cc
// (frames, checksums, pull requests), tcp_runner.cc (connect phase, the loop, liveness).
#pragma once
#include <arpa/inet.h>
#include <algorithm>
#include <cmath>
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
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <thread>

#include "checksum.h"
#include "net_util.h"
#include "transport.h"


namespace tg {
namespace tcp {
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
// Most payload bytes one send() / recv() call moves (the raw-TCP pair of bench:dataplane uses the same). Receives
// stay small enough that the bytes a recv() just wrote are still in L2 when the arrival checksum reads them
// (folding CRC32C runs at ~60 GB/s from L2, a third of that from L3).
constexpr uint64_t kMaxSend = 8ull << 20;
constexpr uint64_t kMaxRecv = 256ull << 10;
// In-order lanes start a frame on a new connection only when the previous connection has at most this many bytes
// not yet handed to the network (SIOCOUTQNSD): one block on the wire at a time, as λScale's binomial steps
// assume (§4.2).
constexpr int kDrainedBytes = 64 << 10;

using Clock = std::chrono::steady_clock;
inline double msBetween(Clock::time_point a, Clock::time_point b) {
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

class Runner : OutcomeRecorder {
 public:
  // `adopted`: connections the idle gate accepted before the run (their Hello still unread); `refused` records what
  // this run drops from the network (tcp_transport.cc "Boundary refusals").
  Runner(const RunSpec& s, std::shared_ptr<StoreData> st, RunSink& k, int listenFd, int wakeFd, std::vector<int> adopted, RefusalLog& refused)
      : spec(s), store(std::move(st)), sink(k), lfd(listenFd), wfd(wakeFd), adopted_(std::move(adopted)), refused_(refused) {}
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
  std::vector<int> adopted_;
  RefusalLog& refused_;
  // Records a refusal from c's remote address.
  void refuse(Conn* c, const char* reason) { refused_.add(reason, remoteAddress(c->fd)); }
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
  // spec.paceBytesPerS: a lane whose next block is not due yet waits until pacedUntil (the wait's timeout ends there).
  bool paced = false;
  Clock::time_point pacedUntil;
  uint64_t armedBytes = 0;  // payload bytes of every block armed so far (the pace counts from loopStart)
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

  std::string peerName(int32_t p) const { return peerLabel(spec, p); }
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

}  // namespace tcp
}  // namespace tg
